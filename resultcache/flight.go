package resultcache

// Flight is one fill of a key under way: the sessions that ask for the
// key meanwhile wait for it (Lead) instead of sending the same statement.
type Flight struct {
	done    chan struct{}
	waiters int
}

// Done is closed when the fill is over (kept or not).
func (f *Flight) Done() <-chan struct{} { return f.done }

// Lead returns the fill under way for k and whether the caller leads it:
// a leader fills and then calls Land; a follower waits on Done and looks
// the key up again. A nil Flight means neither: MaxWaiters sessions wait
// already, and the caller runs its statement itself.
func (c *Cache) Lead(k Key) (f *Flight, leader bool) {
	c.flightMu.Lock()
	defer c.flightMu.Unlock()
	if f = c.flights[k]; f != nil {
		if f.waiters >= c.opt.MaxWaiters {
			c.st.waitersRefused.Add(1)
			return nil, false
		}
		f.waiters++
		c.st.waits.Add(1)
		return f, false
	}
	f = &Flight{done: make(chan struct{})}
	c.flights[k] = f
	return f, true
}

// Land ends the fill the caller led.
func (c *Cache) Land(k Key, f *Flight) {
	c.flightMu.Lock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	c.flightMu.Unlock()
	close(f.done)
}
