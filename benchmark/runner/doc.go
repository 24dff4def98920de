// Command runner is the engine of benchmark/run.sh: it starts gw, nginx and the upstream
// pinned to disjoint CPU sets, drives them with wrk (or ab, in --ocelot mode) in
// alternating rounds, reads each server's own CPU time and memory from /proc around every
// run, and writes the medians, with every gw figure as a ratio to nginx proxying in the same
// round, as Markdown, JSON and PNG charts. Given -render it only redraws a saved JSON
// report. Figures are meant to be compared side by side within one report, never across
// machines.
package main
