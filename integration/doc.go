// Package integration tests gw from the outside: it builds the real gwctl binary, starts it
// with real worker processes in a temporary prefix on free ports, drives the Admin API and
// the proxy over real sockets to real upstream servers, and sends real signals.
package integration
