package node

// SetEventQueueSize sets the bound of the event queue of the nodes built after
// it, and returns what restores it.
func SetEventQueueSize(n int) func() {
	old := eventQueueSize
	eventQueueSize = n
	return func() { eventQueueSize = old }
}
