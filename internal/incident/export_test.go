package incident

// Buffered is how many attempts wait to be written (for benchmarks).
func (r *Recorder) Buffered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buf)
}

// Drop forgets what is buffered (for benchmarks).
func (r *Recorder) Drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = r.buf[:0]
}
