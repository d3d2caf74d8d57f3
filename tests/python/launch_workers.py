"""launch_workers.py - a launcher as torchrun is one, for tests: starts one worker process per
config given (LOCAL_RANK, RANK and WORLD_SIZE set as a launcher sets them), each running the
same program on its own config, and exits with the first failure's status.

  python3 launch_workers.py PROGRAM CONFIG [CONFIG...]
"""
import os
import subprocess
import sys


def main():
    program, configs = sys.argv[1], sys.argv[2:]
    workers = []
    for rank, config in enumerate(configs):
        env = dict(os.environ, LOCAL_RANK=str(rank), RANK=str(rank),
                   WORLD_SIZE=str(len(configs)))
        workers.append(subprocess.Popen([sys.executable, program, config], env=env))
    status = 0
    for w in workers:
        code = w.wait()
        status = status or code
    sys.exit(status)


if __name__ == "__main__":
    main()
