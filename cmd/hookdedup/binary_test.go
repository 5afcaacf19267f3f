//go:build !race && !load

package main

// buildBinary says whether hookdedupBinary builds serve apart (see there).
const buildBinary = false
