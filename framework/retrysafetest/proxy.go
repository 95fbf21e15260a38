package retrysafetest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// ProxyConfig tunes [StartProxy]. The zero value forwards bytes untouched.
// With either function set, the proxy reads HTTP/1.1 (plain text) request
// by request; both are called from many goroutines at once.
type ProxyConfig struct {
	// DropAnswerFunc is called once per forwarded exchange with the request
	// (its body readable again) and the raw bytes of the server's complete
	// answer. Returning true drops the answer: the client's connection is
	// closed without a byte of it, after the server finished (and
	// committed). Defaults to nil: every answer is forwarded.
	DropAnswerFunc func(req *http.Request, answer []byte) bool
	// StandInFunc is called once per request before it is forwarded. A
	// response it returns is written to the client in the server's place
	// (a 503 or a 409 that a gateway or a busy server gives), and the
	// request never reaches the server. A request it lets through reaches
	// DropAnswerFunc as the same *http.Request, so that the two can share
	// what they know of an exchange. Defaults to nil: every request is forwarded.
	StandInFunc func(req *http.Request) *http.Response
}

// Proxy forwards the connections it accepts to one target address.
type Proxy struct {
	target string
	addr   string
	cfg    ProxyConfig

	mu    sync.Mutex
	ln    net.Listener
	pairs map[*pair]struct{}
	open  chan struct{} // closed while bytes flow; open while held
}

// pair is one client connection and its server connection.
type pair struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		p.client.Close()
		if p.server != nil {
			p.server.Close()
		}
	})
}

// StartProxy listens on a free port of 127.0.0.1 and forwards to target,
// a HOST:PORT.
func StartProxy(target string, cfg ProxyConfig) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{target: target, addr: ln.Addr().String(), cfg: cfg, pairs: map[*pair]struct{}{}, open: open}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's HOST:PORT; it stays the same across [Proxy.Cut] and
// [Proxy.Restore].
func (p *Proxy) Addr() string { return p.addr }

// Cut closes the listener and every open connection: new connections are
// refused until [Proxy.Restore].
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.pairs {
		c.close()
	}
	clear(p.pairs)
}

// Restore listens again on the same address after [Proxy.Cut].
func (p *Proxy) Restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close cuts the proxy for good.
func (p *Proxy) Close() { p.Cut() }

// Hold stops forwarding: connections stay open and are still accepted, but
// no byte crosses the proxy (and no new connection reaches the target)
// until [Proxy.Release].
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Release forwards again what [Proxy.Hold] held.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// wait blocks while the proxy is held; false means the pair was closed.
func (p *Proxy) wait(c *pair) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-c.done:
		return false
	}
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			c := &pair{client: client, done: make(chan struct{})}
			p.mu.Lock()
			if p.ln != ln { // cut meanwhile
				p.mu.Unlock()
				client.Close()
				continue
			}
			p.pairs[c] = struct{}{}
			p.mu.Unlock()
			go p.handle(c)
		}
	}()
}

func (p *Proxy) handle(c *pair) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.pairs, c)
		p.mu.Unlock()
	}()
	if !p.wait(c) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	c.server = server
	select {
	case <-c.done: // cut while dialling
		p.mu.Unlock()
		server.Close()
		return
	default:
	}
	p.mu.Unlock()
	if p.cfg.DropAnswerFunc != nil || p.cfg.StandInFunc != nil {
		p.exchange(c)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(c, server, c.client); c.close() })
	p.pipe(c, c.client, server)
	c.close()
	wg.Wait()
}

// pipe copies src to dst, waiting while the proxy is held.
func (p *Proxy) pipe(c *pair, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// exchange serves one client connection request by request.
func (p *Proxy) exchange(c *pair) {
	fromClient := bufio.NewReader(c.client)
	var answer bytes.Buffer
	fromServer := bufio.NewReader(io.TeeReader(c.server, &answer))
	for {
		req, err := http.ReadRequest(fromClient)
		if err != nil {
			return
		}
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			// The proxy reads the whole body before anything else happens.
			if _, err := io.WriteString(c.client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
			req.Header.Del("Expect")
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if !p.wait(c) {
			return
		}
		if p.cfg.StandInFunc != nil {
			if res := p.cfg.StandInFunc(req); res != nil {
				if res.ProtoMajor == 0 {
					res.ProtoMajor, res.ProtoMinor = 1, 1
				}
				if err := res.Write(c.client); err != nil || res.Close || req.Close {
					return
				}
				continue
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if err := req.Write(c.server); err != nil {
			return
		}
		answer.Reset()
		res, err := http.ReadResponse(fromServer, req)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			return
		}
		res.Body.Close()
		raw := bytes.Clone(answer.Bytes())
		req.Body = io.NopCloser(bytes.NewReader(body))
		if p.cfg.DropAnswerFunc != nil && p.cfg.DropAnswerFunc(req, raw) {
			return
		}
		if !p.wait(c) {
			return
		}
		if _, err := c.client.Write(raw); err != nil {
			return
		}
		if res.Close || req.Close {
			return
		}
	}
}

// ReadAnswer parses raw answer bytes, as passed to [ProxyConfig.DropAnswerFunc],
// into a response with its body read.
func ReadAnswer(raw []byte) (*http.Response, []byte, error) {
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, err
	}
	return res, body, nil
}
