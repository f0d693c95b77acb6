package backend

import (
	"fmt"
	"strings"
)

// MariaDBAtLeast reports whether the server version string v (as a
// greeting announces it; a MariaDB before 11 announces itself as
// 5.5.5-10.x) is MariaDB major.minor or later.
func MariaDBAtLeast(v string, major, minor int) bool {
	if !strings.Contains(v, "MariaDB") {
		return false
	}
	var a, b int
	if _, err := fmt.Sscanf(strings.TrimPrefix(v, "5.5.5-"), "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > major || a == major && b >= minor
}
