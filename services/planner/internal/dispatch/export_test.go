package dispatch

// WakePending reports whether a wake-up of partition p waits in its channel, not yet taken by
// the partition's dispatcher (tests of the wake linger: a wake-up taken begins a linger).
func (d *Dispatcher) WakePending(p int) bool { return len(d.wake[p]) > 0 }
