package plugins

import (
	"errors"
	"strings"
	"testing"
)

// testWatcher is a ConnWatcher whose observer notes the changes it hears.
type testWatcher struct {
	testPlugin
	err     error
	none    bool
	changes *[]string
}

func (w *testWatcher) ObserveConns(*Shared) (ConnObserver, error) {
	if w.err != nil || w.none {
		return nil, w.err
	}
	return &testObserver{w.name, w.changes}, nil
}

type testObserver struct {
	name    string
	changes *[]string
}

func (o *testObserver) ConnChanged(from, to ConnState) {
	*o.changes = append(*o.changes, o.name+":"+string('0'+byte(from))+">"+string('0'+byte(to)))
}

// Every watcher's observer is started, in name order; one that fails is left out and
// named in the error, one with nothing to watch is left out silently.
func TestObserveConns(t *testing.T) {
	var changes []string
	Register(&testWatcher{testPlugin: testPlugin{name: "test-w-b"}, changes: &changes})
	Register(&testWatcher{testPlugin: testPlugin{name: "test-w-a"}, changes: &changes})
	Register(&testWatcher{testPlugin: testPlugin{name: "test-w-c"}, err: errors.New("no area left")})
	Register(&testWatcher{testPlugin: testPlugin{name: "test-w-d"}, none: true})
	observers, err := ObserveConns(&Shared{})
	if err == nil || err.Error() != "test-w-c: no area left" {
		t.Errorf("err = %v, want test-w-c's", err)
	}
	for _, o := range observers {
		o.ConnChanged(ConnUnseen, ConnNew)
	}
	if got := strings.Join(changes, " "); got != "test-w-a:0>1 test-w-b:0>1" {
		t.Errorf("observers heard %q, want test-w-a's and test-w-b's, in that order", got)
	}
}

// testPart is a MasterPart that notes its life in a shared trace.
type testPart struct {
	testPlugin
	fail  *bool
	trace *[]string
}

func (p *testPart) StartMaster(*MasterEnv) (MasterInstance, error) {
	if *p.fail {
		return nil, errors.New("segment unreadable")
	}
	*p.trace = append(*p.trace, "start:"+p.name)
	return &testPartInstance{p.name, p.trace}, nil
}

type testPartInstance struct {
	name  string
	trace *[]string
}

func (i *testPartInstance) WorkerExited(int) {}
func (i *testPartInstance) Close()           { *i.trace = append(*i.trace, "close:"+i.name) }

// Parts start in name order; when one fails, those started are closed and the error names
// the plugin.
func TestStartMaster(t *testing.T) {
	var trace []string
	ok, fail := false, false
	Register(&testPart{testPlugin: testPlugin{name: "test-m-a"}, fail: &ok, trace: &trace})
	Register(&testPart{testPlugin: testPlugin{name: "test-m-b"}, fail: &fail, trace: &trace})
	parts, err := StartMaster(&MasterEnv{})
	if err != nil || len(parts) != 2 || strings.Join(trace, " ") != "start:test-m-a start:test-m-b" {
		t.Fatalf("StartMaster = %d parts, %v, trace %q", len(parts), err, trace)
	}
	trace, fail = nil, true
	parts, err = StartMaster(&MasterEnv{})
	if err == nil || err.Error() != "test-m-b: segment unreadable" || parts != nil {
		t.Fatalf("StartMaster with a failing part = %v, %v", parts, err)
	}
	if got := strings.Join(trace, " "); got != "start:test-m-a close:test-m-a" {
		t.Errorf("trace %q: the part started before the failure was not closed", got)
	}
}
