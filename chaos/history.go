package chaos

import (
	"encoding/json"
	"os"
	"slices"
	"sync"
	"time"
)

// Kind is what an operation did to an offset register.
type Kind uint8

const (
	// Commit is an OffsetCommit of one partition: a register write.
	Commit Kind = iota + 1
	// Fetch is an OffsetFetch of one partition: a register read.
	Fetch
)

func (k Kind) String() string {
	switch k {
	case Commit:
		return "commit"
	case Fetch:
		return "fetch"
	}
	return "unknown-kind"
}

// Outcome is what the client learnt about an operation.
type Outcome uint8

const (
	// OK: the cluster acknowledged the commit or answered the fetch.
	OK Outcome = iota + 1
	// Failed: the cluster refused the operation before it could take
	// effect (a fencing or validation error). A failed commit never
	// happened.
	Failed
	// Unknown: the answer was lost (timeout, closed connection, an error
	// that does not say whether the write was applied). An unknown commit
	// may take effect at any time after its call, or never.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return "unknown-outcome"
}

// Register names one committed offset: a partition of a topic in a group.
type Register struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Op is one recorded operation on one register. Times are since the start
// of the run, read from one monotonic clock: every client runs in this
// process.
type Op struct {
	Client   int           `json:"client"`
	Kind     Kind          `json:"kind"`
	Register Register      `json:"register"`
	Value    int64         `json:"value"` // the offset committed, or the one fetched (-1: none)
	Call     time.Duration `json:"call"`
	Return   time.Duration `json:"return"`
	Outcome  Outcome       `json:"outcome"`
	Err      string        `json:"err,omitempty"`
	// Member and Generation are those a consumer group member committed
	// with; empty and -1 for raw committers and fetchers.
	Member     string `json:"member,omitempty"`
	Generation int32  `json:"generation"`
	// Final marks the reads taken after the faults healed, which the
	// durability check compares with the acknowledged commits.
	Final bool `json:"final,omitempty"`
}

// SyncRecord is one assignment a consumer group member received: the whole
// of it, as parsed from its SyncGroup answer, with the generation it was
// given in.
type SyncRecord struct {
	Group       string        `json:"group"`
	Member      string        `json:"member"`
	Instance    string        `json:"instance,omitempty"`
	Generation  int32         `json:"generation"`
	Partitions  []int32       `json:"partitions"`
	At          time.Duration `json:"at"`
	Cooperative bool          `json:"cooperative"`
}

// AssignRecord is a consumer-protocol (KIP-848) member starting to own
// partitions: the start of its assignment callback.
type AssignRecord struct {
	Group      string        `json:"group"`
	Member     string        `json:"member"`
	Epoch      int32         `json:"epoch"`
	Partitions []int32       `json:"partitions"`
	At         time.Duration `json:"at"`
}

// Release is a member giving partitions up: the end of its revocation
// callback (Revoked), or the client learning that its membership is gone
// (Lost).
type Release struct {
	Group      string        `json:"group"`
	Member     string        `json:"member"`
	Generation int32         `json:"generation"`
	Partitions []int32       `json:"partitions"`
	Lost       bool          `json:"lost"`
	At         time.Duration `json:"at"`
}

// FaultRecord is one nemesis action, from injection to heal.
type FaultRecord struct {
	Name     string        `json:"name"`
	Target   string        `json:"target,omitempty"`
	Start    time.Duration `json:"start"`
	Healed   time.Duration `json:"healed"`
	Recovery time.Duration `json:"recovery"` // the longest wait for an acknowledged commit of a register group across the fault (see measureRecovery)
	Err      string        `json:"err,omitempty"`
}

// History is everything one run recorded. Safe for concurrent use.
type History struct {
	start time.Time

	mu       sync.Mutex
	ops      []Op
	syncs    []SyncRecord
	assigns  []AssignRecord
	releases []Release
	faults   []FaultRecord
	churn    int
}

// NewHistory starts the run's clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the time since the run started.
func (h *History) Now() time.Duration { return time.Since(h.start) }

func (h *History) addOp(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *History) addSync(r SyncRecord) {
	h.mu.Lock()
	h.syncs = append(h.syncs, r)
	h.mu.Unlock()
}

func (h *History) addAssign(r AssignRecord) {
	h.mu.Lock()
	h.assigns = append(h.assigns, r)
	h.mu.Unlock()
}

func (h *History) addRelease(r Release) {
	h.mu.Lock()
	h.releases = append(h.releases, r)
	h.mu.Unlock()
}

// AddFault records a nemesis action (nemeses call it when they heal).
func (h *History) AddFault(f FaultRecord) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

func (h *History) addChurn() {
	h.mu.Lock()
	h.churn++
	h.mu.Unlock()
}

// Snapshot is a copy of a History, for the checkers and for saving.
type Snapshot struct {
	Ops      []Op           `json:"ops"`
	Syncs    []SyncRecord   `json:"syncs"`
	Assigns  []AssignRecord `json:"assigns,omitempty"`
	Releases []Release      `json:"releases"`
	Faults   []FaultRecord  `json:"faults"`
	Churn    int            `json:"churn"`
}

// Snapshot copies what has been recorded so far.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Snapshot{
		Ops:      slices.Clone(h.ops),
		Syncs:    slices.Clone(h.syncs),
		Assigns:  slices.Clone(h.assigns),
		Releases: slices.Clone(h.releases),
		Faults:   slices.Clone(h.faults),
		Churn:    h.churn,
	}
}

// WriteFile saves the snapshot as JSON.
func (s Snapshot) WriteFile(path string) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
