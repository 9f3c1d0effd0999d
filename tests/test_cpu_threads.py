"""torch's CPU threads beside other work (fairseq_fusion/compat/cpu_threads.py): a core that another process keeps busy
takes one thread away in a command-line run; alone, with a thread variable set, with FUSION_CPU_THREADS=off, or where
torch's count was chosen, torch's count stays. Processes: the thread count is chosen when a process configures its
command-line run, and the work beside it must be another process."""
import os
import subprocess
import sys

import pytest

from fairseq_fusion.compat import cpu_threads

CORES = len(os.sched_getaffinity(0))
PROBE = ("import logging, torch; logging.basicConfig(level=logging.INFO); default = torch.get_num_threads(); "
         "import fairseq_fusion.command_line as c; c.configure(); print(default, torch.get_num_threads())")


def threads_after_plugin_import(env):
    """(torch's default threads, threads after importing the plugin) in a new process."""
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    default, chosen = map(int, proc.stdout.split()[-2:])
    return default, chosen, proc.stderr


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "FUSION_CPU_THREADS")}
    return dict(env, **extra)


@pytest.mark.skipif(CORES < 2, reason="one core: torch has one thread anyway")
def test_a_busy_core_takes_one_thread_away():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # other work: one core, the whole time
    try:
        default, chosen, log = threads_after_plugin_import(clean_env())
        _, told, _ = threads_after_plugin_import(clean_env(OMP_NUM_THREADS=str(CORES)))
        _, off, _ = threads_after_plugin_import(clean_env(FUSION_CPU_THREADS="off"))
    finally:
        burner.kill()
        burner.wait()
    assert default == CORES
    assert 1 <= chosen <= CORES - 1, log[-2000:]  # at least the burner's core is taken away (others may be busy too)
    said = [line for line in log.splitlines() if "torch uses" in line]
    assert len(said) == 1 and said[0].startswith("WARNING") and "FUSION_CPU_THREADS=off keeps" in said[0]
    assert told == CORES and off == CORES  # the user's OMP_NUM_THREADS and the switch are never overridden


def test_a_count_the_program_chose_or_a_thread_variable_is_never_overridden():
    cores = set(range(4))
    assert cpu_threads.chosen_elsewhere(4, cores, {}) is None  # torch's default: the fitting may act
    assert cpu_threads.chosen_elsewhere(3, cores, {}) == "torch's thread count 3 is not its default 4"
    assert cpu_threads.chosen_elsewhere(4, cores, {"MKL_NUM_THREADS": "4"}) == "MKL_NUM_THREADS is set"
    assert cpu_threads.chosen_elsewhere(4, cores, {"FUSION_CPU_THREADS": "off"}) == "FUSION_CPU_THREADS=off"


def test_busy_cores_from_two_readings_of_proc_stat(tmp_path):
    """/proc/stat's per-core lines (jiffies: user nice system idle iowait irq softirq steal ...), the cores of the
    affinity only; the aggregate 'cpu' line and other cores are left out."""
    def stat(cpu0, cpu1, cpu2):
        text = "cpu  999 0 999 999 0 0 0 0 0 0\n" + "".join(
            f"cpu{i} {u} 0 {s} {idle} {io} 0 0 0 0 0\n" for i, (u, s, idle, io) in enumerate((cpu0, cpu1, cpu2)))
        path = tmp_path / f"stat{len(list(tmp_path.iterdir()))}"
        path.write_text(text + "intr 1 2 3\n")
        return str(path)

    before = cpu_threads.cpu_times({0, 1}, stat((10, 0, 100, 0), (10, 0, 100, 0), (0, 0, 0, 0)))
    # over the window: core 0 busy all 100 jiffies (90 user, 10 system), core 1 idle 95 and iowait 5; core 2 is not ours
    after = cpu_threads.cpu_times({0, 1}, stat((100, 10, 100, 0), (10, 0, 195, 5), (500, 0, 0, 0)))
    assert before == (220, 200) and after == (420, 300)
    assert cpu_threads.busy_cores(before, after, 2) == pytest.approx(1.0)
    assert cpu_threads.threads_for(2, 2, 1.0) == 1 and cpu_threads.threads_for(2, 2, 0.3) == 2
    assert cpu_threads.threads_for(8, 8, 7.9) == 1 and cpu_threads.threads_for(4, 8, 2.0) == 4
