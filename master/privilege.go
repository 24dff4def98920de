package master

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"gw/conf"
	"gw/internal/confio"
)

// workerUser is who the workers run as: config.yaml's user, nginx's user directive,
// resolved once at start. The master keeps root; only the workers drop it.
type workerUser struct {
	spec string // as configured, for messages
	uid  int
	gid  int
	// groups are the supplementary groups, as initgroups(3) would set them for the user.
	groups []int
}

// resolveWorkerUser resolves "name" or "name group" (names or numeric ids). Without a
// group the user's primary group is taken: nginx takes the group named like the user,
// which Debian's nobody (group nogroup) does not have.
func resolveWorkerUser(spec string) (*workerUser, error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 || len(fields) > 2 {
		return nil, fmt.Errorf(`user: must be "user" or "user group", got %q`, spec)
	}
	u, err := confio.LookupUser(fields[0])
	if err != nil {
		return nil, fmt.Errorf("user: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user: %q has the non-numeric uid %q", fields[0], u.Uid)
	}
	gidText := u.Gid
	if len(fields) == 2 {
		g, err := confio.LookupGroup(fields[1])
		if err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		gidText = g.Gid
	}
	gid, err := strconv.Atoi(gidText)
	if err != nil {
		return nil, fmt.Errorf("user: %q has the non-numeric gid %q", spec, gidText)
	}
	w := &workerUser{spec: spec, uid: uid, gid: gid}
	// A user absent from /etc/group still gets its primary group; a lookup failure here
	// leaves only that, the safe direction.
	ids, _ := u.GroupIds()
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err == nil && !slices.Contains(w.groups, n) {
			w.groups = append(w.groups, n)
		}
	}
	if !slices.Contains(w.groups, gid) {
		w.groups = append(w.groups, gid)
	}
	return w, nil
}

// setUpWorkerUser reads config.yaml's user. As nginx, it is a warning, not an error, when
// the master is not root: it could not switch users anyway, and the workers run as it.
func (m *Master) setUpWorkerUser(cfg *conf.Config) error {
	if cfg.User == "" {
		return nil
	}
	if euid := os.Geteuid(); euid != 0 {
		m.log.Warnf("user %q ignored: the user directive makes sense only if the master runs as root (it runs as uid %d), so the workers run as uid %d too", cfg.User, euid, euid)
		return nil
	}
	u, err := resolveWorkerUser(cfg.User)
	if err != nil {
		return err
	}
	m.workerUser = u
	return nil
}

// workerSysProcAttr makes exec switch a worker to the worker user in the child between
// fork and exec: the new program never runs as root, not even for an instant, and holds
// no capability, while its inherited sockets and segments stay usable.
func (m *Master) workerSysProcAttr() *syscall.SysProcAttr {
	u := m.workerUser
	if u == nil {
		return nil
	}
	groups := make([]uint32, len(u.groups))
	for i, g := range u.groups {
		groups[i] = uint32(g)
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: groups}}
}

// explainSpawnError adds the likely cause when exec as the worker user was refused: the
// kernel reports a prefix the user cannot enter as a bare "permission denied".
func (m *Master) explainSpawnError(err error) error {
	if m.workerUser == nil || !(errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) {
		return err
	}
	return fmt.Errorf("%w: workers run as user %q, who must be able to enter the prefix %s (search permission on it and on every directory above it)",
		err, m.workerUser.spec, m.paths.Prefix)
}

// prepareWorkerFiles gives the worker user what a worker opens by path, as nginx chowns
// its log files to its user: the error log (a worker reopens it on USR1), the access log
// (created here, since a worker may not create files in logs/), and search permission on
// logs/, where admin.sock is too. Called before workers start or reopen.
func (m *Master) prepareWorkerFiles(cfg *conf.Config) error {
	u := m.workerUser
	if u == nil {
		return nil
	}
	if err := u.makeSearchable(m.paths.Logs); err != nil {
		return err
	}
	if err := u.own(m.paths.ErrorLog); err != nil {
		return err
	}
	if !cfg.AccessLog.Enabled {
		return nil
	}
	path := cfg.AccessLog.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(m.paths.Prefix, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("access_log.path: creating %s for the workers: %w", path, err)
	}
	f.Close()
	return u.own(path)
}

// own makes the worker user the owner of path, with read and write for the owner, as
// nginx's ngx_reopen_files does; the group is left alone.
func (u *workerUser) own(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("giving %s to user %q: %w", path, u.spec, err)
	}
	if int(st.Uid) != u.uid {
		if err := os.Lchown(path, u.uid, -1); err != nil {
			return fmt.Errorf("giving %s to user %q: %w", path, u.spec, err)
		}
	}
	if st.Mode&0o600 != 0o600 {
		if err := os.Chmod(path, os.FileMode(st.Mode&0o777|0o600)); err != nil {
			return fmt.Errorf("giving %s to user %q: %w", path, u.spec, err)
		}
	}
	return nil
}

// makeSearchable lets the worker user pass through dir without listing it: when it may
// not already, dir's group becomes the user's group with search (x) only, so logs/ stays
// 0710 and unreadable to everyone else.
func (u *workerUser) makeSearchable(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	if u.maySearch(st) {
		return nil
	}
	if err := os.Lchown(dir, -1, u.gid); err != nil {
		return fmt.Errorf("letting user %q into %s: %w", u.spec, dir, err)
	}
	if err := os.Chmod(dir, os.FileMode(st.Mode&0o777|0o010)); err != nil {
		return fmt.Errorf("letting user %q into %s: %w", u.spec, dir, err)
	}
	return nil
}

func (u *workerUser) maySearch(st unix.Stat_t) bool {
	switch {
	case int(st.Uid) == u.uid:
		return st.Mode&0o100 != 0
	case slices.Contains(u.groups, int(st.Gid)):
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

// handAdminSocketToWorkers makes logs/admin.sock the worker user's: connecting to a Unix
// socket needs write permission on it, and it stays 0600, so only the workers (and root)
// may.
func (m *Master) handAdminSocketToWorkers() error {
	u := m.workerUser
	if u == nil {
		return nil
	}
	if err := os.Lchown(m.paths.AdminSocket, u.uid, u.gid); err != nil {
		return fmt.Errorf("giving %s to user %q: %w", m.paths.AdminSocket, u.spec, err)
	}
	return nil
}

// secureInstanceFiles makes what only the master may read owner-only, whoever created
// it: the data directory (it holds consumers' credentials) and the shared-memory
// segments. A segment is a memfd, on no file system; its mode guards it only against
// opening through /proc/<pid>/fd, and the workers' inherited descriptors are unaffected.
func (m *Master) secureInstanceFiles(dataDir string) error {
	st, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dataDir, 0o700); err != nil {
			return fmt.Errorf("data_dir: making %s owner-only: %w", dataDir, err)
		}
		m.log.Warnf("data_dir %s was mode %#o: made it 0700, since it holds consumers' credentials", dataDir, st.Mode().Perm())
	}
	for name, seg := range m.segments {
		if err := unix.Fchmod(int(seg.File().Fd()), 0o600); err != nil {
			return fmt.Errorf("shared memory for %s: making it owner-only: %w", name, err)
		}
	}
	return nil
}
