package config

import (
	"path/filepath"
	"testing"
)

// TestSampleConfigs loads every shipped sample configuration.
func TestSampleConfigs(t *testing.T) {
	files, err := filepath.Glob("../etc/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("sample configs: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
