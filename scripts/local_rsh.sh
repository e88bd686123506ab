#!/bin/sh
# A stand-in for ssh that never leaves this machine: `local_rsh.sh [ssh options] HOST COMMAND...`
# runs COMMAND with sh -c, as sshd hands a command to the login shell, when HOST is a loopback
# address (127.x.x.x, localhost, ::1, with or without user@); for any other host it fails as
# ssh does for a name it cannot resolve (exit code 255). Its stdin, stdout and stderr are the
# command's, so a closed stdin reaches the command as over ssh.
#
#   tfbench launch --rsh=scripts/local_rsh.sh --hosts=127.0.0.1:2222,127.0.0.1:2223 \
#       --remote_cmd="python3 -m tfbench" -- --device=cpu --model=trivial --num_batches=20
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;     # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: local_rsh.sh [ssh options] HOST COMMAND..." >&2
  exit 255
fi
host=${1#*@}
shift
case "$host" in
  127.*|localhost|::1|'[::1]') exec sh -c "$*" ;;
  *) echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
     exit 255 ;;
esac
