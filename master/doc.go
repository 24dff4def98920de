// Package master is the gateway's master process, on nginx's model: it owns every
// listening socket, the shared memory and the Admin API's store for its whole life, and
// runs N worker processes (package worker, this binary re-executed) that serve requests on
// sockets it hands them. It serves no data-plane request itself.
//
// # Generations and slots
//
// A generation is one config.yaml's set of workers: worker_processes of them (--workers
// wins), numbered from 1 at start, one more at each reload. Each worker fills a slot, 0 to
// N-1. For each listen address the master opens one SO_REUSEPORT socket per slot and hands
// socket i to whichever worker fills slot i: at start, on a respawn, on a reload. Workers
// never open or close a listening socket, because closing one resets the connections
// queued on it; they close only their inherited copies. So the master keeps every
// socket across reloads (a reload that shrinks N shares the surplus sockets out, socket i
// to slot i mod N) and closes an address's sockets only when config.yaml no longer lists
// it. A respawned worker inherits its slot's socket and the connections queued in it.
//
// # The snapshot path
//
// An Admin API write is validated, checked by building it as the workers will
// (Options.NewChecker), made durable in the store, and then published: the new
// conf.Snapshot goes to every live worker and to those of a generation starting, and the
// write is answered only once each has acknowledged that version. A 2xx therefore means
// every worker already serves it: read-your-writes, whichever worker the next request
// reaches. A worker that exits meanwhile is not waited for, since its replacement loads the
// latest snapshot before it counts as ready; a worker that refuses the snapshot fails the
// publication, named. Publications are serialised with each other and with reloads
// (publishMu), so versions reach each worker in order and none slips between a new
// generation's first snapshot and its swap; a reload returns only once the old workers
// have stopped accepting (or 5 s have passed), so read-your-writes holds across it too.
//
// # A worker's life
//
//	starting  spawned from /proc/self/exe with its sockets and an IPC socketpair (ipc.ConnFD);
//	          the master checks its version (Hello), sends Setup, then the current snapshot
//	ready     it holds the snapshot and accepts (Ready); only now does it count, for a
//	          reload's swap and for /status/ready
//	draining  told to stop gracefully: it stops accepting, answers with Connection: close,
//	          and exits once its connections are done, by worker_shutdown_timeout
//	exited    reaped by the goroutine that waits for it; the master's loop decides on a respawn
//
// # Signals
//
//	signal     the master                      gwctl
//	HUP        reloads config.yaml             reload, over the control socket
//	USR2       upgrades to the binary on disk  upgrade, over the control socket
//	USR1       reopens the log files           reopen, over the control socket
//	QUIT       stops, letting workers drain    quit
//	TERM, INT  stops at once                   stop
//
// gwctl sends the first three over the control socket instead of a signal so that it can
// wait for the outcome and exit with it. One goroutine, the loop, takes signals, control
// commands and worker exits in turn, so a reload, an upgrade and a stop never overlap and
// an exit is acted on between them; only a backed-off respawn runs later, on its own. A
// stop kills the workers still alive after worker_shutdown_timeout and a second (QUIT) or
// after 3 s (TERM), then removes the pid file and the sockets under logs/.
//
// # Reload
//
// A reload reads config.yaml and refuses what cannot change while running (shared-memory
// sizes, user, data_dir, the metrics and status servers) and a file under which a served
// object would stop building. It opens any new listen address, starts a whole new
// generation and waits until every new worker is ready (15 s each). Only then is the new
// generation swapped in and the old one told to drain. If any new worker fails to start or
// to become ready, the new ones are killed and the old generation serves on untouched; the
// reload fails with the reason, and gwctl reload exits non-zero.
//
// # Upgrade
//
// An upgrade (upgrade.go) starts the binary now on disk as a new master, through
// tableflip, and hands it the instance lock, every data-plane socket of every slot, the
// shared-memory segments, the admin, metrics and status listeners and the TLS ticket
// keys. Meanwhile the Admin API refuses writes (503, Retry-After): the new master reads the
// store once. The new master starts its own first generation on those sockets, takes over
// the pid file and the control and admin sockets once every worker serves, and tells the
// old one; the old master then tells its workers to drain and exits, and they outlive it.
// A new master that fails, or is not ready within --upgrade-timeout, leaves the old one
// serving as before. Only one upgrade runs at a time, and a master refuses to upgrade
// while its own predecessor is still handing over.
//
// # The daemon handshake
//
// `gwctl start` must exit with the truth about the start while the master it starts
// outlives it. Daemonize starts the master in a session of its own and reads one line from
// a pipe, "ready pid=... workers=... listen=... admin=..." once every worker serves or
// "error: ..." when start failed; daemon.go has both ends.
//
// # Crashes
//
// A worker killed, whatever the signal, is respawned at once into its slot, on the same
// socket, with the same generation's config; the connections it had accepted are lost,
// those queued on the socket are not. A worker that panics exits 2 and is respawned like
// any other. A worker that exits with ipc.FatalExitCode (78; its setup cannot work) is not
// respawned, as nginx's "exited with fatal code 2 and cannot be respawned": its slot stays
// empty and /status/ready says so until a reload. A slot that crash-loops, more than 3
// unexpected exits within 10 s, is respawned only after 1 s each time until its crashes
// leave the window. A draining worker, or any worker once the master stops, is never
// respawned. Exits that come during a reload are handled once it is over: a worker of the
// generation it replaced is not respawned.
//
// A master killed leaves its workers to notice EOF on their IPC socket: a serving worker
// exits at once, a draining one finishes its drain. The kernel releases the instance lock
// and, with the last process holding them, the sockets and the shared memory (its counters
// are lost). The pid file and the socket files stay behind; gwctl tells the pid file is
// stale because nobody holds the lock, and `gwctl start` replaces them and starts afresh
// from the store, in which every acknowledged write is durable (package store).
//
// # Files
//
// master.go is the lifecycle (Run, start's steps, the loop, stop); supervisor.go keeps
// the slots filled; process.go is a worker process and its IPC; reload.go, snapshot.go,
// sockets.go, segments.go, upgrade.go and daemon.go are what their names say; control.go
// is the control socket, status.go the status API, facts.go what `gwctl status` shows.
package master
