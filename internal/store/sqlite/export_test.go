package sqlite

// SetFewRows moves the bound under which a list reads the rows a filter
// selects and sorts them, instead of walking its index in order.
func SetFewRows(s *Store, n int) { s.fewRows = n }
