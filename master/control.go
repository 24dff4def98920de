package master

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"gw/conf"
	"gw/master/admin"
	"gw/master/store"
)

// The control socket carries one JSON request line and one JSON reply line per
// connection, so gwctl can wait for the outcome of what it asked and exit with it.

// ControlRequest is what gwctl sends.
type ControlRequest struct {
	Command string `json:"command"` // "reload", "reopen", "status", "export" or "import"
	// Data is the backup an "import" carries.
	Data []byte `json:"data,omitempty"`
}

// ControlReply is what the master answers.
type ControlReply struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Status  *Facts `json:"status,omitempty"`
	// Data is the backup an "export" answers with.
	Data []byte `json:"data,omitempty"`
}

type command struct {
	request ControlRequest
	reply   chan ControlReply
	// written is closed once the reply has gone out (or could not), so that a master
	// that exits right after replying (an upgrade) does not cut its answer off.
	written chan struct{}
}

func (m *Master) listenControl() error {
	_ = os.Remove(m.paths.ControlSocket)
	ln, err := net.Listen("unix", m.paths.ControlSocket)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", m.paths.ControlSocket, err)
	}
	if err := os.Chmod(m.paths.ControlSocket, 0o600); err != nil {
		ln.Close()
		return err
	}
	// After an upgrade the path belongs to the new master's socket: closing ours must not
	// remove it. teardown removes it when this master is the last.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	m.control = ln
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go m.serveControl(conn)
		}
	}()
	return nil
}

func (m *Master) serveControl(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return
	}
	var req ControlRequest
	reply := ControlReply{}
	if err := json.Unmarshal(line, &req); err != nil {
		reply.Message = "bad control request: " + err.Error()
	} else if req.Command == "status" {
		// Status reads state under the mutex and needs no turn in the loop, so it answers
		// even while a reload is waiting for new workers.
		facts := m.Facts()
		reply = ControlReply{OK: true, Status: &facts}
	} else if req.Command == "export" || req.Command == "import" {
		// The Admin API serialises its own writes; neither needs the master's loop.
		reply = m.backup(req)
	} else {
		cmd := command{request: req, reply: make(chan ControlReply, 1), written: make(chan struct{})}
		defer close(cmd.written)
		select {
		case m.commands <- cmd:
			reply = <-cmd.reply
		case <-time.After(time.Minute):
			reply.Message = "the master did not take the request within a minute"
		}
	}
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	out, _ := json.Marshal(reply)
	_, _ = conn.Write(append(out, '\n'))
}

// execute runs a control command in the master's loop; true means the master stops.
func (m *Master) execute(cmd command) bool {
	switch cmd.request.Command {
	case "reload":
		if err := m.reload(); err != nil {
			cmd.reply <- ControlReply{Message: err.Error()}
			return false
		}
		gen := m.sup.current()
		msg := fmt.Sprintf("reloaded: generation %d, %d workers%s", gen.id, gen.workers, m.workersFlagNote(gen))
		cmd.reply <- ControlReply{OK: true, Message: msg}
	case "reopen":
		m.reopen()
		cmd.reply <- ControlReply{OK: true, Message: "log files reopened"}
	case "upgrade":
		pid, err := m.upgrade()
		if err != nil {
			cmd.reply <- ControlReply{Message: err.Error()}
			return false
		}
		// The new master serves the Admin API on the same listening socket: stop taking
		// connections here, and close idle keep-alive ones, before saying the upgrade is
		// done, or a client's next write could still reach this read-only master.
		m.admin.close()
		cmd.reply <- ControlReply{OK: true, Message: fmt.Sprintf("upgraded: new master pid %d runs %s; the old workers drain", pid, m.binary)}
		if cmd.written != nil {
			select {
			case <-cmd.written:
			case <-time.After(5 * time.Second):
			}
		}
		m.handOver()
		return true
	default:
		cmd.reply <- ControlReply{Message: fmt.Sprintf("unknown control command %q", cmd.request.Command)}
	}
	return false
}

// backup serves gwctl export and import. They come over the control socket rather than
// the Admin API because they are operator actions on this host: the socket's file mode is
// the credential, and no new endpoint is exposed on the Admin API's TCP port. Import then
// goes through the Admin API's own validation, store and publication.
func (m *Master) backup(req ControlRequest) ControlReply {
	h := m.admin.handler.Load()
	if req.Command == "export" {
		return ControlReply{OK: true, Data: h.Export()}
	}
	if m.readOnly.Load() {
		return ControlReply{Message: errUpgradeInProgress.Error() + ": import again once the new master serves"}
	}
	summary, err := h.Import(context.Background(), req.Data, "gwctl import", "control socket")
	if err != nil {
		return ControlReply{Message: err.Error()}
	}
	return ControlReply{OK: true, Message: summary}
}

// ExportOffline reads the data directory of an instance whose master is not running and
// returns it as a backup, changing nothing on disk.
func ExportOffline(paths Paths) ([]byte, error) {
	cfg, err := conf.Load(paths.Config)
	if err != nil {
		return nil, err
	}
	objects, revision, err := store.ReadDir(paths.DataDir(cfg.DataDir))
	if err != nil {
		return nil, err
	}
	return admin.EncodeBackup(objects, revision), nil
}

// Control sends one request to the master of paths and returns its reply.
func Control(paths Paths, command string, timeout time.Duration) (ControlReply, error) {
	return ControlWith(paths, ControlRequest{Command: command}, timeout)
}

// ControlWith sends req to the master of paths and returns its reply.
func ControlWith(paths Paths, request ControlRequest, timeout time.Duration) (ControlReply, error) {
	command := request.Command
	var reply ControlReply
	conn, err := net.DialTimeout("unix", paths.ControlSocket, 2*time.Second)
	if err != nil {
		return reply, fmt.Errorf("reaching the master at %s: %w", paths.ControlSocket, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	req, err := json.Marshal(request)
	if err != nil {
		return reply, fmt.Errorf("%s: %w", command, err)
	}
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return reply, err
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return reply, fmt.Errorf("waiting for the master's answer to %s: %w", command, err)
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return reply, err
	}
	if !reply.OK {
		return reply, errors.New(reply.Message)
	}
	return reply, nil
}

// workersFlagNote explains a worker count that is not the file's: `gwctl start --workers`
// holds for the master's life, so a reload that changed worker_processes seemed ignored.
func (m *Master) workersFlagNote(gen *generation) string {
	if m.opts.Workers <= 0 || gen.workers != m.opts.Workers || gen.cfg.Workers() == m.opts.Workers {
		return ""
	}
	fromFile := strconv.Itoa(gen.cfg.WorkerProcesses)
	if gen.cfg.WorkerProcesses == 0 {
		fromFile = fmt.Sprintf("auto (%d)", gen.cfg.Workers())
	}
	return fmt.Sprintf(" (the --workers %d this master was started with wins over worker_processes %s in %s)",
		m.opts.Workers, fromFile, m.paths.Config)
}
