package main

import "fmt"

// count writes n followed by the noun that reads right for it: "1 key", "0 keys",
// "2 keys".
func count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
