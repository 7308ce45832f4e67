package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAttrChecks runs provider/tests/attr_checks.c on a NIC of rnic's:
// attribute bits of the verbs take effect or are refused with Linux's
// errnos — ibv_modify_qp's port, an address vector without a GRH,
// arming path migration (rnic has no alternate paths; MIGRATED is
// accepted and queried back), ibv_create_qp_ex's send_ops_flags per
// transport (as rxe's provider refuses them), ibv_rereg_mr's flags (as
// libibverbs and the kernel refuse them).
func TestAttrChecks(t *testing.T) {
	lib := buildProvider(t)
	upNICs(t, []string{"127.0.0.54"})
	bin := filepath.Join(t.TempDir(), "attr_checks")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-o", bin, "../../provider/tests/attr_checks.c", "-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	c := exec.Command(bin, "rnic0")
	c.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("attr_checks: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
