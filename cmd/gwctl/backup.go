package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gw/internal/atomicfile"
	"gw/master"
	"gw/master/standalone"
	"gw/master/store"
)

// backupTimeout bounds an export or import over the control socket; an import waits for
// every worker to serve the result.
const backupTimeout = 2 * time.Minute

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write every route, upstream, service, consumer... as one JSON backup (reads the data directory when gw is not running)",
		Flags: []cli.Flag{
			prefixFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the backup to `FILE` (mode 0600: it holds credentials) instead of stdout"},
			&cli.StringFlag{Name: "format", Value: "gw", Usage: "`FORMAT` gw (the JSON backup import reads) or apisix-yaml (APISIX's standalone conf/apisix.yaml, for config_provider yaml)"},
		},
		Action: func(c *cli.Context) error {
			format := c.String("format")
			if format != "gw" && format != "apisix-yaml" {
				return fmt.Errorf("--format must be gw or apisix-yaml, got %q", format)
			}
			paths, err := instancePaths(c)
			if err != nil {
				return err
			}
			var backup []byte
			if _, running := paths.RunningMaster(); running == nil {
				reply, err := master.ControlWith(paths, master.ControlRequest{Command: "export"}, backupTimeout)
				if err != nil {
					return fmt.Errorf("export failed: %w", err)
				}
				backup = reply.Data
			} else if errors.Is(running, master.ErrNotRunning) {
				// Nobody writes the directory while no master runs, so reading it is safe.
				if backup, err = master.ExportOffline(paths); err != nil {
					return fmt.Errorf("export failed (gw is not running, so the data directory was read): %w", err)
				}
			} else {
				return running
			}
			if format == "apisix-yaml" {
				if backup, err = standaloneFile(backup); err != nil {
					return fmt.Errorf("export failed: %w", err)
				}
			}
			if out := c.String("output"); out != "" {
				return writeBackup(out, backup)
			}
			_, err = os.Stdout.Write(backup)
			return err
		},
	}
}

// standaloneFile rewrites a backup as APISIX's standalone file: the same objects, each
// kind's in the same order.
func standaloneFile(backup []byte) ([]byte, error) {
	var kinds map[string]json.RawMessage
	if err := json.Unmarshal(backup, &kinds); err != nil {
		return nil, fmt.Errorf("reading the backup: %w", err)
	}
	var objects []store.Object
	for _, kind := range store.Kinds() {
		var values []json.RawMessage
		if raw, ok := kinds[string(kind)]; ok {
			if err := json.Unmarshal(raw, &values); err != nil {
				return nil, fmt.Errorf("reading the backup's %s: %w", kind, err)
			}
		}
		for i, v := range values {
			objects = append(objects, store.Object{Kind: kind, ID: fmt.Sprintf("[%d]", i), Value: v})
		}
	}
	return standalone.Encode(objects, store.Kinds())
}

// writeBackup replaces path with data, never leaving a half-written backup behind. Mode
// 0600: a backup holds credentials and private keys.
func writeBackup(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600, "."+filepath.Base(path)+".tmp-*"); err != nil {
		return fmt.Errorf("--output %s: %w", path, err)
	}
	return nil
}

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "store every object of a backup made by export (replacing those with the same id); all or nothing",
		ArgsUsage: "FILE (- for stdin)",
		Flags:     []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			args, prefix := splitTrailingPrefix(c.Args().Slice())
			if len(args) != 1 {
				return fmt.Errorf("import takes one backup file (or - for stdin), got %d arguments", len(args))
			}
			if prefix != "" {
				if err := c.Set("prefix", prefix); err != nil {
					return err
				}
			}
			name := args[0]
			var backup []byte
			var err error
			if name == "-" {
				backup, err = io.ReadAll(os.Stdin)
			} else {
				backup, err = os.ReadFile(name)
			}
			if err != nil {
				return fmt.Errorf("reading the backup: %w", err)
			}
			paths, err := instancePaths(c)
			if err != nil {
				return err
			}
			// Import needs the running master: it validates like the Admin API and makes
			// every worker serve the result before answering.
			if _, err := paths.RunningMaster(); err != nil {
				return fmt.Errorf("%w; start gw, then import", err)
			}
			reply, err := master.ControlWith(paths, master.ControlRequest{Command: "import", Data: backup}, backupTimeout)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			fmt.Println(reply.Message)
			return nil
		},
	}
}

// splitTrailingPrefix takes a --prefix given after the file (`gwctl import FILE --prefix
// DIR`), which the flag parser leaves among the arguments because it stops at the first
// one that is not a flag.
func splitTrailingPrefix(args []string) (rest []string, prefix string) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "--prefix" || a == "-p" || a == "-prefix") && i+1 < len(args):
			prefix = args[i+1]
			i++
		case strings.HasPrefix(a, "--prefix="):
			prefix = strings.TrimPrefix(a, "--prefix=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, prefix
}
