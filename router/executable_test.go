package router

import "testing"

func TestUnwrapExecutable(t *testing.T) {
	const v = 101119
	for _, tc := range []struct {
		sql, inner string
		ok         bool
	}{
		{"/*!40101 SET NAMES utf8mb4 */;", "SET NAMES utf8mb4", true},
		{"/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */", "SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0", true},
		{"/*M!100602 execute immediate if(@x, 'start transaction', 'LOCK TABLES t WRITE')*/", "execute immediate if(@x, 'start transaction', 'LOCK TABLES t WRITE')", true},
		{"/*! SELECT 1 */", "SELECT 1", true},
		{"/*M!999999 SELECT 1 */", "", false}, // a later server's
		{"/*!40101 SET a=1 */ /*!40101 SET b=2 */", "", false},
		{"/*!40101 SET a=1 */ SELECT 2", "", false},
		{"SELECT /*!40101 1 */", "", false},
		{"/* plain */", "", false},
		{"/*!4010 SET a=1 */", "", false},
	} {
		inner, ok := UnwrapExecutable(tc.sql, v)
		if inner != tc.inner || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.sql, inner, ok, tc.inner, tc.ok)
		}
	}
	for v, want := range map[string]int{"10.11.19-MariaDB-0+deb12u1": 101119, "5.5.5-10.6.2-MariaDB": 100602, "8.0.36": 80036, "x": 0} {
		if got := VersionID(v); got != want {
			t.Errorf("VersionID(%q) = %d, want %d", v, got, want)
		}
	}
}
