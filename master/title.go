package master

import (
	"fmt"
	"os"
	"syscall"
)

// The titles ps shows (argv[0]), as nginx's "nginx: master process" and "nginx: worker
// process"; the arguments follow them.
const (
	ProcessTitle       = "gw: master process"
	workerProcessTitle = "gw: worker process"
)

// ReexecUnderTitle makes this process show ProcessTitle: unless argv[0] is that already,
// it executes this binary again under that name with the same arguments and environment.
// It returns only on failure. gwctl start sets the title when it spawns the master, but an
// upgrade cannot: tableflip starts the new binary with its path as argv[0]. Go cannot
// rewrite its own argv in place, and an exec keeps the pid, which the old master and
// systemd follow, and every descriptor not marked close-on-exec: the hand-over's, which
// tableflip marks only once New reads them, so this must run before Run.
func ReexecUnderTitle() error {
	if len(os.Args) > 0 && os.Args[0] == ProcessTitle {
		return nil
	}
	// This binary, even if the file on disk was replaced: workers start the same way.
	err := syscall.Exec("/proc/self/exe", append([]string{ProcessTitle}, os.Args[1:]...), os.Environ())
	return fmt.Errorf("re-executing as %q: %w", ProcessTitle, err)
}
