package etcdstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"gw/conf"
	"gw/master/store"
)

// Client is one node's connection to etcd: the store.Remote its Store writes through,
// and the list and watch Sync reads with. Safe for concurrent use.
type Client struct {
	cli     *clientv3.Client
	prefix  string // "/apisix"
	timeout time.Duration

	reachable atomic.Bool
	probeErr  atomic.Pointer[string] // why the last probe failed, for the error log
	// revision is etcd's revision as last seen by the probe (APISIX's x_etcd_index).
	revision atomic.Int64
	stop     context.CancelFunc
}

// Open connects to the cluster cfg names; relative TLS paths are under prefixDir. It does
// not wait for etcd to answer: a node may start while etcd is down.
func Open(cfg conf.Etcd, prefixDir string) (*Client, error) {
	tlsConfig, err := clientTLS(cfg, prefixDir)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Host,
		DialTimeout:          min(cfg.Timeout, 5*time.Second),
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Username:             cfg.User,
		Password:             cfg.Password,
		TLS:                  tlsConfig,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("deployment.etcd: connecting to %s: %w", strings.Join(cfg.Host, ", "), err)
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Client{cli: cli, prefix: cfg.Prefix, timeout: cfg.Timeout, stop: stop}
	go c.probe(ctx)
	return c, nil
}

func clientTLS(cfg conf.Etcd, prefixDir string) (*tls.Config, error) {
	https := false
	for _, h := range cfg.Host {
		https = https || strings.HasPrefix(h, "https://")
	}
	if !https && cfg.TLS.Cert == "" {
		return nil, nil
	}
	path := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(prefixDir, p)
	}
	t := &tls.Config{InsecureSkipVerify: !cfg.TLS.Verify, MinVersion: tls.VersionTLS12}
	if cfg.TLS.Cert != "" {
		pair, err := tls.LoadX509KeyPair(path(cfg.TLS.Cert), path(cfg.TLS.Key))
		if err != nil {
			return nil, fmt.Errorf("deployment.etcd.tls: %w", err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	if cfg.TLS.CA != "" {
		pem, err := os.ReadFile(path(cfg.TLS.CA))
		if err != nil {
			return nil, fmt.Errorf("deployment.etcd.tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("deployment.etcd.tls.ca: %s holds no PEM certificate", cfg.TLS.CA)
		}
		t.RootCAs = pool
	}
	return t, nil
}

// probeEvery is how often reachability is checked: apisix_etcd_reachable follows an
// outage within two periods.
const probeEvery = time.Second

func (c *Client) probe(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, probeEvery)
		resp, err := c.cli.Get(pctx, c.prefix+"/gen_id", clientv3.WithCountOnly())
		cancel()
		c.reachable.Store(err == nil)
		if err == nil {
			c.revision.Store(resp.Header.Revision)
		} else {
			why := err.Error()
			c.probeErr.Store(&why)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reachable reports whether etcd answered the last probe.
func (c *Client) Reachable() bool { return c.reachable.Load() }

// Revision is etcd's revision when it last answered a probe.
func (c *Client) Revision() uint64 { return uint64(c.revision.Load()) }

// Close stops the probe and closes the connection.
func (c *Client) Close() error {
	c.stop()
	return c.cli.Close()
}

func (c *Client) key(kind store.Kind, id string) string {
	return c.prefix + "/" + string(kind) + "/" + id
}

// parseKey splits <prefix>/<kind>/<id>; ok is false for every other key (gen_id, a kind
// gw does not have, a deeper path).
func (c *Client) parseKey(key []byte) (store.Kind, string, bool) {
	rest, found := strings.CutPrefix(string(key), c.prefix+"/")
	if !found {
		return "", "", false
	}
	kind, id, found := strings.Cut(rest, "/")
	if !found || id == "" || strings.Contains(id, "/") {
		return "", "", false
	}
	for _, k := range store.Kinds() {
		if string(k) == kind {
			return k, id, true
		}
	}
	return "", "", false
}

// isNodeRecord reports whether key is under <prefix>/gw/, where nodes keep their records
// (cluster.go) and which no config object is.
func (c *Client) isNodeRecord(key []byte) bool {
	return strings.HasPrefix(string(key), c.prefix+"/gw/")
}

// failed says what a failed call means for the Admin API's user.
func (c *Client) failed(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd did not answer %s in time (deployment.etcd.write_timeout): is etcd up and reachable? %w", what, err)
	}
	return fmt.Errorf("etcd: %s: %w", what, err)
}

// Put is store.Remote's Put.
func (c *Client) Put(ctx context.Context, kind store.Kind, id string, value []byte, ifModified uint64) (uint64, bool, error) {
	key := c.key(kind, id)
	if ifModified == 0 {
		resp, err := c.cli.Put(ctx, key, string(value), clientv3.WithPrevKV())
		if err != nil {
			return 0, false, c.failed("a put of "+key, err)
		}
		return uint64(resp.Header.Revision), resp.PrevKv == nil, nil
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(ifModified))).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, false, c.failed("a compare-and-swap of "+key, err)
	}
	if !resp.Succeeded {
		return 0, false, store.ErrConflict
	}
	return uint64(resp.Header.Revision), false, nil
}

// Delete is store.Remote's Delete.
func (c *Client) Delete(ctx context.Context, kind store.Kind, id string) (uint64, bool, error) {
	key := c.key(kind, id)
	resp, err := c.cli.Delete(ctx, key)
	if err != nil {
		return 0, false, c.failed("a delete of "+key, err)
	}
	return uint64(resp.Header.Revision), resp.Deleted > 0, nil
}

// NewID is store.Remote's NewID: as APISIX, the revision of a put to <prefix>/gen_id,
// zero-padded to 20 digits.
func (c *Client) NewID(ctx context.Context) (string, error) {
	resp, err := c.cli.Put(ctx, c.prefix+"/gen_id", "1")
	if err != nil {
		return "", c.failed("a put of "+c.prefix+"/gen_id", err)
	}
	return fmt.Sprintf("%020d", resp.Header.Revision), nil
}

// List reads every object under the prefix at one revision, which it returns.
func (c *Client) List(ctx context.Context) ([]store.Applied, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, 0, c.failed("the list of "+c.prefix+"/", err)
	}
	var objects []store.Applied
	for _, kv := range resp.Kvs {
		kind, id, ok := c.parseKey(kv.Key)
		if !ok {
			continue
		}
		objects = append(objects, store.Applied{Kind: kind, ID: id, Value: withID(kind, id, kv.Value),
			CreatedIndex: uint64(kv.CreateRevision), ModifiedIndex: uint64(kv.ModRevision)})
	}
	return objects, uint64(resp.Header.Revision), nil
}

// errCompacted ends a watch whose start revision etcd no longer has.
var errCompacted = errors.New("etcdstore: revision compacted")

// watch calls apply for each batch of changes from revision from on, in order, with the
// highest revision the batch covers, until ctx ends or the watch breaks (errCompacted
// when etcd has compacted past what the node has).
func (c *Client) watch(ctx context.Context, from uint64, apply func([]store.Applied, uint64)) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range c.cli.Watch(ctx, c.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(int64(from))) {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("%w: the node had revision %d, etcd keeps from %d", errCompacted, from-1, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) == 0 {
			continue
		}
		var changes []store.Applied
		var revision uint64
		for _, ev := range resp.Events {
			if c.isNodeRecord(ev.Kv.Key) {
				// Not config, and not counted: each node writes its record when the
				// revision it serves grows, so counting the records would grow it again.
				continue
			}
			revision = max(revision, uint64(ev.Kv.ModRevision))
			kind, id, ok := c.parseKey(ev.Kv.Key)
			if !ok {
				continue
			}
			ch := store.Applied{Kind: kind, ID: id}
			if ev.Type == clientv3.EventTypePut {
				ch.Value, ch.CreatedIndex, ch.ModifiedIndex = withID(kind, id, ev.Kv.Value), uint64(ev.Kv.CreateRevision), uint64(ev.Kv.ModRevision)
			}
			changes = append(changes, ch)
		}
		if revision == 0 {
			continue // node records alone
		}
		apply(changes, revision)
		from = revision + 1
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("etcdstore: the watch ended")
}

// withID adds "id" to a value written without one (etcdctl put of {"uri":...}): as in
// APISIX, the key names the object. A consumer is named by its username, which stays
// the writer's to give, and plugin_metadata holds no id (the key is the plugin's name,
// as APISIX stores it); a value that is not a JSON object is left as it is.
func withID(kind store.Kind, id string, value []byte) []byte {
	if kind == store.Consumers || kind == store.PluginMetadata {
		return value
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(value, &fields) != nil {
		return value
	}
	if _, has := fields["id"]; has {
		return value
	}
	quoted, _ := json.Marshal(id)
	rest := bytes.TrimSpace(value)[1:] // after "{"
	out := append([]byte(`{"id":`), quoted...)
	if len(bytes.TrimSpace(rest)) > 1 { // more than "}"
		out = append(out, ',')
	}
	return append(out, rest...)
}
