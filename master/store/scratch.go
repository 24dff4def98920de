package store

// Scratch returns a copy of the store that lives in memory only: its writes persist
// nowhere and never touch s. The Admin API applies a whole import to a scratch copy and
// validates the result there before changing anything real.
func (s *Store) Scratch() (*Store, error) {
	objects, revision := s.All()
	return OpenBackend(&memoryBackend{objects: objects, revision: revision})
}

// OpenMemory returns an empty store that persists nothing, for tests and fuzzing that
// need a fresh store per case without a directory and an fsync per write.
func OpenMemory() *Store {
	s, err := OpenBackend(&memoryBackend{})
	if err != nil {
		panic("BUG: store: an empty memory backend failed to load: " + err.Error())
	}
	return s
}

// memoryBackend holds nothing: Load hands back what it was built with, writes succeed.
type memoryBackend struct {
	objects  []Object
	revision uint64
}

func (b *memoryBackend) Load([]Kind) ([]Object, uint64, error) { return b.objects, b.revision, nil }
func (b *memoryBackend) Put(Object) error                      { return nil }
func (b *memoryBackend) Delete(Kind, string, uint64) error     { return nil }
func (b *memoryBackend) SetRevision(uint64) error              { return nil }
func (b *memoryBackend) Close() error                          { return nil }
