#!/bin/sh
# The lab's key for root and for the unprivileged user "harness" (no sudo: what a machine
# without root looks like), fresh host keys, then sshd in the foreground.
set -eu
printf '%s\n' "$AUTHORIZED_KEY" > /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys
mkdir -p /home/harness/.ssh
printf '%s\n' "$AUTHORIZED_KEY" > /home/harness/.ssh/authorized_keys
chown -R harness /home/harness/.ssh
chmod 0700 /home/harness/.ssh
chmod 0600 /home/harness/.ssh/authorized_keys
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e
