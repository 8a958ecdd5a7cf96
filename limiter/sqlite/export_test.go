package sqlite

// SetOpenHook makes f run at the points of every open where another process
// may act ("pragmas", "migrated"), until the returned func restores none.
func SetOpenHook(f func(stage, path string)) (restore func()) {
	testHookOpen = f
	return func() { testHookOpen = nil }
}
