package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/transport"
)

// AwaitTimeout bounds Do and Await: an answer that does not come within it
// is recorded as missing.
var AwaitTimeout = 5 * time.Second

// Run plays sc against the server at addr and returns its transcript: one
// entry per leaf step (sc.Leaves()), empty for steps that record nothing
// (Send, Sleep). kfake applies the kfake-only normalisations of
// normalize.go. An error means the script could not run (a dial failed, a
// script bug), not that an answer was unexpected.
func Run(ctx context.Context, addr string, kfake bool, sc Scenario) ([]string, error) {
	r := &runner{ctx: ctx, addr: addr, syms: newSymbols(kfake), conns: map[string]*conn{}}
	defer r.close()
	var out []string
	err := r.play(sc.Steps, &out)
	return out, err
}

// play runs steps, appending one line per leaf to out.
func (r *runner) play(steps []Step, out *[]string) error {
	for _, s := range steps {
		if s.op == opGroup {
			start := len(*out)
			if err := r.play(s.group, out); err != nil {
				return err
			}
			if len(s.outcomes) > 0 {
				settle((*out)[start:], s.outcomes)
			}
			continue
		}
		line, err := r.step(s)
		if err != nil {
			return fmt.Errorf("step %d: %w", len(*out)+1, err)
		}
		*out = append(*out, line)
	}
	return nil
}

// settle replaces the lines of an Either group by one canonical line when
// they are one of its outcomes.
func settle(lines []string, outcomes [][]string) {
	var got []string
	for _, l := range lines {
		if l != "" {
			got = append(got, l)
		}
	}
	for _, o := range outcomes {
		if slices.Equal(got, o) {
			for i := range lines {
				lines[i] = ""
			}
			lines[0] = fmt.Sprintf("(race) one of the %d accepted outcomes", len(outcomes))
			return
		}
	}
}

type runner struct {
	ctx   context.Context
	addr  string
	syms  *symbols
	conns map[string]*conn
}

// conn is one member's connection and its pending request.
type conn struct {
	c       *transport.RawClient
	pending *inflight
	closed  bool
}

type inflight struct {
	req  kmsg.Request
	done chan result
}

type result struct {
	resp kmsg.Response
	err  error
}

func (r *runner) step(s Step) (string, error) {
	switch s.op {
	case opSleep:
		select {
		case <-time.After(s.d):
		case <-r.ctx.Done():
			return "", r.ctx.Err()
		}
		return "", nil
	case opDo:
		if line, err := r.send(s.member, s.req); line != "" || err != nil {
			return line, err
		}
		return r.await(s.member, AwaitTimeout, false)
	case opSend:
		return r.send(s.member, s.req)
	case opAwait:
		return r.await(s.member, AwaitTimeout, false)
	case opWait:
		return r.await(s.member, s.d, true)
	}
	return "", fmt.Errorf("unknown step kind %d", s.op)
}

// conn returns member's connection, dialling it on first use with the
// member's name as client id.
func (r *runner) conn(member string) (*conn, error) {
	if c, ok := r.conns[member]; ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	tc, err := transport.Dial(ctx, r.addr)
	if err != nil {
		return nil, err
	}
	tc.SetClientID(member)
	c := &conn{c: tc}
	r.conns[member] = c
	return c, nil
}

// send sends a copy of req, with symbols bound, on member's connection. It
// returns a line only when the request could not be sent.
func (r *runner) send(member string, req kmsg.Request) (string, error) {
	c, err := r.conn(member)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s %s v%d", member, kmsg.NameForKey(req.Key()), req.GetVersion())
	switch {
	case c.closed:
		return name + ": connection closed", nil
	case c.pending != nil:
		return fmt.Sprintf("%s: not sent, %s v%d still pending", name, kmsg.NameForKey(c.pending.req.Key()), c.pending.req.GetVersion()), nil
	}
	if k := req.Key(); k == kmsg.ConsumerGroupHeartbeat.Int16() || k == kmsg.ConsumerGroupDescribe.Int16() {
		if err := r.loadTopics(); err != nil {
			return "", err
		}
	}
	req, err = clone(req)
	if err != nil {
		return "", err
	}
	r.syms.bind(req)
	if _, err := c.c.Send(req); err != nil {
		c.closed = true
		return name + ": connection closed", nil
	}
	in := &inflight{req: req, done: make(chan result, 1)}
	c.pending = in
	go func() {
		resp, err := c.c.Recv(r.ctx, req)
		in.done <- result{resp, err}
	}()
	return "", nil
}

// await records the answer to member's pending request, or that none came
// within d ("pending" when stillPending, else "no answer").
func (r *runner) await(member string, d time.Duration, stillPending bool) (string, error) {
	c, err := r.conn(member)
	if err != nil {
		return "", err
	}
	in := c.pending
	if in == nil {
		return member + ": nothing pending", nil
	}
	name := fmt.Sprintf("%s %s v%d", member, kmsg.NameForKey(in.req.Key()), in.req.GetVersion())
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case res := <-in.done:
		c.pending = nil
		if res.err != nil {
			c.closed = true
			_ = c.c.Close()
			if r.ctx.Err() != nil {
				return "", r.ctx.Err()
			}
			return name + ": connection closed", nil
		}
		return member + " " + r.syms.render(member, res.resp), nil
	case <-timer.C:
		if stillPending {
			return fmt.Sprintf("%s: pending after %v", name, d), nil
		}
		return fmt.Sprintf("%s: no answer within %v", name, d), nil
	case <-r.ctx.Done():
		return "", r.ctx.Err()
	}
}

// loadTopics learns the server's topic ids, on a connection of its own,
// the first time a request of the consumer group protocol needs them: its
// requests and answers name topics by id, and ids differ between servers.
func (r *runner) loadTopics() error {
	if r.syms.topicIDs != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, r.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12 // topic ids; null topics: all of them
	resp, err := c.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("loading topic ids: %w", err)
	}
	ids, names := map[string][16]byte{}, map[[16]byte]string{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			ids[*t.Topic], names[t.TopicID] = t.TopicID, *t.Topic
		}
	}
	for _, name := range Topics {
		if _, ok := ids[name]; !ok {
			return fmt.Errorf("loading topic ids: the server has no id for topic %s", name)
		}
	}
	r.syms.topicIDs, r.syms.topicNames = ids, names
	return nil
}

func (r *runner) close() {
	for _, c := range r.conns {
		_ = c.c.Close()
	}
}

// clone copies a request through its encoding, so a scenario's requests
// are never modified and can be played against several servers.
func clone(req kmsg.Request) (kmsg.Request, error) {
	c := kmsg.RequestForKey(req.Key())
	if c == nil {
		return nil, errors.New("unknown request key")
	}
	c.SetVersion(req.GetVersion())
	if err := c.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("copying %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return c, nil
}
