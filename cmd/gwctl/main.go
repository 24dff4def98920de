// Command gwctl runs and controls a gw gateway: `gwctl start` runs the master, which
// re-executes this binary as its workers; the other verbs find the master through
// <prefix>/logs/gwctl.pid.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"gw/internal/runtimepatch"
	_ "gw/plugins/all"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	cli.VersionPrinter = printVersion
	app := &cli.App{
		Name:    "gwctl",
		Usage:   "an API gateway on nginx's master/worker model that speaks APISIX's Admin API",
		Version: version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prefix", Aliases: []string{"p"}, Value: ".", Usage: "instance directory holding conf/, logs/ and the data directory"},
		},
		Commands: []*cli.Command{
			startCommand(),
			stopCommand(),
			quitCommand(),
			reloadCommand(),
			upgradeCommand(),
			reopenCommand(),
			statusCommand(),
			testCommand(),
			exportCommand(),
			importCommand(),
			workerCommand(),
		},
		HideHelpCommand: true,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "gwctl: %v\n", err)
		os.Exit(1)
	}
}

// printVersion answers `gwctl --version` with what the binary was built from, as
// `nginx -V` does, including the two changes `make build` makes to Go's runtime
// (tools/runtime-overlay.sh), measured: a plain `go build` has neither.
func printVersion(c *cli.Context) {
	fmt.Printf("gwctl version %s\n", c.App.Version)
	fmt.Printf("built with %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if order, err := runtimepatch.SettledOrder(); err != nil {
		fmt.Printf("poller order: not measured: %v\n", err)
	} else {
		fmt.Printf("poller order: %s\n", order)
	}
	if pace, woke, err := runtimepatch.SettledPace(); err != nil {
		fmt.Printf("monitor after a system call: not measured: %v\n", err)
	} else {
		fmt.Printf("monitor after a system call: %s (%d wake-ups in %v)\n", pace, woke, runtimepatch.PaceWindow)
	}
}
