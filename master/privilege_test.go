package master

import (
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestResolveWorkerUser(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	nobodyUID, _ := strconv.Atoi(nobody.Uid)
	nobodyGID, _ := strconv.Atoi(nobody.Gid)
	tests := []struct {
		spec     string
		uid, gid int
	}{
		{"root", 0, 0},
		{"0", 0, 0},
		{"root root", 0, 0},
		{"0 0", 0, 0},
		{"nobody", nobodyUID, nobodyGID}, // the primary group, whatever it is named
		{"nobody root", nobodyUID, 0},
		{" nobody  0 ", nobodyUID, 0},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			u, err := resolveWorkerUser(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if u.uid != tt.uid || u.gid != tt.gid {
				t.Fatalf("%q: uid %d gid %d, want %d %d", tt.spec, u.uid, u.gid, tt.uid, tt.gid)
			}
			if !slices.Contains(u.groups, tt.gid) {
				t.Fatalf("%q: groups %v lack the gid %d", tt.spec, u.groups, tt.gid)
			}
		})
	}
}

func TestResolveWorkerUserRejects(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"", `user: must be "user" or "user group", got ""`},
		{"root root root", `user: must be "user" or "user group", got "root root root"`},
		{"no-such-user-gw", `user: no user "no-such-user-gw" on this system`},
		{"4000000000", `user: no user with id 4000000000 on this system`},
		{"root no-such-group-gw", `user: no group "no-such-group-gw" on this system`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			u, err := resolveWorkerUser(tt.spec)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("resolveWorkerUser(%q) = %+v, %v; want error %q", tt.spec, u, err, tt.want)
			}
		})
	}
}

func TestWorkerUserMaySearch(t *testing.T) {
	u := &workerUser{spec: "w", uid: 1000, gid: 100, groups: []int{100, 27}}
	tests := []struct {
		name     string
		uid, gid uint32
		mode     uint32
		want     bool
	}{
		{"owner with x", 1000, 0, 0o700, true},
		{"owner without x, others with", 1000, 0, 0o601, false}, // the kernel checks the owner bits only
		{"primary group with x", 0, 100, 0o710, true},
		{"supplementary group with x", 0, 27, 0o710, true},
		{"group without x", 0, 100, 0o701, false},
		{"other with x", 0, 0, 0o711, true},
		{"other without x", 0, 0, 0o770, false},
		{"root's 0700", 0, 0, 0o700, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := unix.Stat_t{Uid: tt.uid, Gid: tt.gid, Mode: unix.S_IFDIR | tt.mode}
			if got := u.maySearch(st); got != tt.want {
				t.Fatalf("maySearch(uid %d gid %d mode %#o) = %t, want %t", tt.uid, tt.gid, tt.mode, got, tt.want)
			}
		})
	}
}

func TestWorkerSysProcAttr(t *testing.T) {
	m := &Master{}
	if attr := m.workerSysProcAttr(); attr != nil {
		t.Fatalf("no user: %+v, want nil (workers run as the master)", attr)
	}
	m.workerUser = &workerUser{spec: "w", uid: 65534, gid: 65534, groups: []int{65534, 27}}
	cred := m.workerSysProcAttr().Credential
	if cred.Uid != 65534 || cred.Gid != 65534 || !slices.Equal(cred.Groups, []uint32{65534, 27}) || cred.NoSetGroups {
		t.Fatalf("credential %+v", cred)
	}
	if err := m.explainSpawnError(unix.EACCES); !strings.Contains(err.Error(), `workers run as user "w"`) {
		t.Fatalf("EACCES explained as %q", err)
	}
	if err := m.explainSpawnError(unix.ENOENT); err != unix.ENOENT {
		t.Fatalf("ENOENT explained as %q", err)
	}
}
