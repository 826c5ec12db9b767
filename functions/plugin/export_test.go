package plugin

// SetPartSize sets how many entries a cell carries at most, for the
// benchmark, and returns a function that restores it.
func SetPartSize(n int) func() {
	old := partSize
	partSize = n
	return func() { partSize = old }
}
