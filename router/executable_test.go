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

func TestSkipIgnored(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/*M!999999\\- enable the sandbox mode */ \n-- MariaDB dump 10.19\n--\n/*!40101 SET @OLD=@@X */;", "/*!40101 SET @OLD=@@X */;"},
		{"# a\n/* b */ -- c\nSELECT 1", "SELECT 1"},
		{"/*M!100602 SET x=1 */", "/*M!100602 SET x=1 */"},
		{"/*M!999999 LOCK */ SELECT 2", "SELECT 2"}, {"/*!99999 SET y=1 */", "/*!99999 SET y=1 */"}, // 9.99.99 < 10.11.19: MariaDB runs it
		{"--x SELECT", "--x SELECT"}, // "--" without a blank is an operator, not a comment
		{"-- only", ""},
		{"/* open", "/* open"},
	} {
		if got := SkipIgnored(tc.in, 101119); got != tc.want {
			t.Errorf("SkipIgnored(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInlineExecutable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */", "START TRANSACTION  WITH CONSISTENT SNAPSHOT "},
		{"SELECT '/*!1 x */' /*M!999999 LATER */", "SELECT '/*!1 x */' "},
		{"COMMIT", "COMMIT"},
	} {
		if got := InlineExecutable(tc.in, 101119); got != tc.want {
			t.Errorf("InlineExecutable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
