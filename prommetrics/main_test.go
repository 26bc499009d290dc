package prommetrics_test

import (
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
