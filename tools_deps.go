//go:build tools

// Package gw pins the design card's libraries in go.mod before every package uses them.
package gw

import (
	_ "github.com/VictoriaMetrics/metrics"
	_ "github.com/cloudflare/tableflip"
	_ "github.com/hashicorp/go-memdb"
	_ "github.com/urfave/cli/v2"
	_ "github.com/valyala/fasthttp"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
)
