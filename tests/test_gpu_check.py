"""benchmarks/gpu_check.py (issue 13, item 6) runs end to end on the fake NVML library, so that the script prepared
for a lent GPU machine is known to work: every row of the metric table is checked per device, the fake's driver
samples are found (50, 20 ms apart), and the training part says why it is skipped without torch and CUDA."""
import importlib.util
import os

from sysprof._native import nvml_metrics

from fake_nvml.support import fake, fake_builds, fresh_pynvml, needs_native  # noqa: F401 - fixtures

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpu_check.py")


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_native
def test_gpu_check_on_the_fake(fake, fresh_pynvml, tmp_path, capsys):  # noqa: F811
    fake()
    gc = _load()
    md, js = tmp_path / "check.md", tmp_path / "check.json"
    assert gc.main(["--seconds", "0.3", "--calls", "20", "--train-seconds", "0.2", "--rounds", "1",
                    "--markdown", str(md), "--json", str(js)]) == 0
    text = md.read_text()
    assert text in capsys.readouterr().out  # the same report on stdout
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    metrics = nvml_metrics()
    assert len(rows) == 2 * (len(metrics) + 1)  # every table row and the XID waiter, on both devices
    for m in metrics:
        assert f"| {m['metric']} | `{m['call']}` | " in text
    # the fake: device 1 refuses the instant power field; device 0's driver keeps 50 power samples 20 ms apart
    assert "| power_field | `NVML_FI_DEV_POWER_INSTANT` | no (NVML_ERROR_NOT_SUPPORTED) | - |" in text
    assert "| gpu/0 | power (NVML_TOTAL_POWER_SAMPLES) | NVML_SUCCESS | 50 | 20.0 |" in text
    assert "| gpu/1 | power (NVML_TOTAL_POWER_SAMPLES) | NVML_ERROR_NOT_SUPPORTED | - | - | - |" in text
    assert "| xid events | `nvmlDeviceRegisterEvents` | yes |" in text
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if not cuda:
        assert "## 3 Training-step overhead\n\nSkipped: " in text and "needs torch with CUDA" in text
