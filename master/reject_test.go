package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"gw/ipc"
)

func newTestWorkerProc() *workerProc {
	return &workerProc{exited: make(chan struct{}), ready: make(chan struct{}), ackWake: make(chan struct{})}
}

func TestARejectedSnapshotFailsItsPublicationAtOnce(t *testing.T) {
	w := newTestWorkerProc()
	w.recordAck(3)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- w.waitAck(ctx, 4)
	}()
	w.recordReject(ipc.Reject{Version: 4, Reason: "routes/r: no-such-plugin"})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "refused version 4") || !strings.Contains(err.Error(), "routes/r") {
			t.Fatalf("waitAck after a reject: %v, want the refusal with its reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitAck still waits after the worker refused the version")
	}
	if rej := w.refuses(); rej == nil || rej.Version != 4 {
		t.Fatalf("refuses() = %v, want version 4", rej)
	}
	// A stale reject (a version older than one it serves) changes nothing; serving a
	// later version clears the refusal.
	w.recordReject(ipc.Reject{Version: 2, Reason: "old"})
	if rej := w.refuses(); rej.Version != 4 {
		t.Errorf("a stale reject replaced the current one: %v", rej)
	}
	w.recordAck(5)
	if rej := w.refuses(); rej != nil {
		t.Errorf("after serving version 5 the worker still refuses %v", rej)
	}
}

func TestReadinessNamesAWorkerThatRefusesTheConfig(t *testing.T) {
	w := newTestWorkerProc()
	close(w.ready)
	w.recordAck(1)
	m := &Master{sup: newSupervisor(nil, nil), version: 2}
	m.sup.gen, m.sup.slots = &generation{workers: 1}, []*workerProc{w}
	w.recordReject(ipc.Reject{Version: 2, Reason: "upstreams/u: cannot build"})
	err := m.notReady()
	if err == nil || !strings.Contains(err.Error(), "refused configuration version 2: upstreams/u: cannot build") {
		t.Fatalf("notReady() = %v, want the refusal and its reason", err)
	}
	m.configRejections = 1
	facts := m.Facts()
	if len(facts.Workers) != 1 || !strings.Contains(facts.Workers[0].Rejected, "upstreams/u") || facts.ConfigRejections != 1 {
		t.Errorf("Facts() = %+v, want the worker's refusal and one rejection counted", facts)
	}
	if f := m.metricsFacts(); f.WorkersRefusingConfig != 1 || f.ConfigRejections != 1 {
		t.Errorf("metrics facts: %d refusing, %d rejections; want 1 and 1", f.WorkersRefusingConfig, f.ConfigRejections)
	}
	w.recordAck(2)
	if err := m.notReady(); err != nil {
		t.Errorf("notReady() once the worker serves version 2: %v", err)
	}
}
