// Command gwctl runs and controls a gw gateway: `gwctl start` runs the master, which
// re-executes this binary as its workers; the other verbs find the master through
// <prefix>/logs/gwctl.pid.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"gw/internal/pollorder"
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
// `nginx -V` does, including the order its poller serves ready connections in, measured:
// `make build` patches it to readiness order (tools/netpoll-overlay.sh), a plain
// `go build` does not.
func printVersion(c *cli.Context) {
	fmt.Printf("gwctl version %s\n", c.App.Version)
	order, err := pollorder.Settled()
	if err != nil {
		fmt.Printf("built with %s %s/%s; poller order not measured: %v\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, err)
		return
	}
	fmt.Printf("built with %s %s/%s; poller order: %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, order)
}
