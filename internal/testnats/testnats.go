package testnats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EnvURL names the variable holding the test server's URL.
const EnvURL = "TEST_NATS_URL"

// DefaultURL is the server tests use when EnvURL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// Server is a test's share of the NATS server.
type Server struct {
	// URL is the server's URL.
	URL string
	// Stream and SubjectPrefix are unique to the test; the stream is
	// deleted when the test ends.
	Stream        string
	SubjectPrefix string
	// JetStream is a JetStream context on a direct connection.
	JetStream jetstream.JetStream
}

// New returns the server for tb, or skips tb (fails it under CI) when it is
// unreachable or has no JetStream.
func New(tb testing.TB) *Server {
	tb.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		u = DefaultURL
	}
	nc, err := nats.Connect(u, nats.Timeout(2*time.Second))
	if err == nil {
		var js jetstream.JetStream
		if js, err = jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			if err == nil {
				tb.Cleanup(nc.Close)
				suffix := random()
				s := &Server{URL: u, Stream: "T_" + strings.ToUpper(suffix), SubjectPrefix: "t_" + suffix, JetStream: js}
				tb.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = js.DeleteStream(ctx, s.Stream)
				})
				return s
			}
		}
		nc.Close()
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("testnats: NATS JetStream at %s is required under CI: %v", u, err)
	}
	tb.Skipf("testnats: NATS JetStream at %s is unreachable (%v); start nats-server -js", u, err)
	return nil
}

func random() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Proxy is a TCP proxy to the server that a test can cut.
type Proxy struct {
	URL    string
	target string
	ln     net.Listener
	mu     sync.Mutex
	up     bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to s, up; it is closed when the test ends.
func (s *Server) NewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{URL: "nats://" + ln.Addr().String(), target: u.Host, ln: ln, up: true, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		up := p.up
		p.mu.Unlock()
		if !up {
			_ = c.Close()
			continue
		}
		upstream, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[upstream] = true, true
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(upstream, c)
		go pipe(c, upstream)
	}
}

// Cut closes every connection through the proxy and refuses new ones until
// [Proxy.Restore].
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = true
}

func (p *Proxy) close() {
	p.Cut()
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	p.wg.Wait()
}
