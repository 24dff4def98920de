-- Prints wrk's summary as one JSON line the runner reads; latencies in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'GWBENCH {"requests":%.0f,"duration_us":%.0f,"bytes":%.0f,"connect_errors":%.0f,"read_errors":%.0f,' ..
    '"write_errors":%.0f,"status_errors":%.0f,"timeouts":%.0f,"p50_us":%.0f,"p90_us":%.0f,"p99_us":%.0f,"max_us":%.0f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
