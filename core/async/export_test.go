package async

// Untaken is how many handles t keeps for Take (collected ones included).
func Untaken(t *Table) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.finished)
}
