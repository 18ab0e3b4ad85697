package groups

// broadcast wakes any number of waiters at once: wait returns a channel
// that the next fire closes. It has no lock of its own: its owner's lock
// guards it (Coordinator.mu, where wait needs only the read lock, and
// MemLog.mu). Make one with newBroadcast.
type broadcast struct{ ch chan struct{} }

func newBroadcast() broadcast { return broadcast{ch: make(chan struct{})} }

func (b *broadcast) wait() <-chan struct{} { return b.ch }

func (b *broadcast) fire() {
	close(b.ch)
	b.ch = make(chan struct{})
}
