package sqlite

import "testing"

// A chunk of a size no statement was made for is an error, never the empty text, which
// would run as a statement that does nothing and says nothing.
func TestBySize_SizeWithoutStatement(t *testing.T) {
	for _, size := range chunkSizes {
		if q, err := multi(multiKeyAdd, size); err != nil || q == "" {
			t.Errorf("multi(multiKeyAdd, %d) = %q, %v; want its statement", size, q, err)
		}
	}
	for _, size := range []int{0, 3, 129} {
		if q, err := multi(multiKeyFind, size); err == nil {
			t.Errorf("multi(multiKeyFind, %d) = %q, want an error", size, q)
		}
		if q, err := writerSQL[kindDelivery].of(size); err == nil {
			t.Errorf("the deliveries' insert for %d rows = %q, want an error", size, q)
		}
		if q, err := sqlPriorBySize.of(size); err == nil {
			t.Errorf("the prior claims' statement for %d rows = %q, want an error", size, q)
		}
	}
}
