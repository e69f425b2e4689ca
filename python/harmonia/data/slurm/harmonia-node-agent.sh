#!/bin/sh
# Harmonia's node agent under Slurm (docs/node-agent.md, "Under Slurm"): one harmonia-agentd per
# node and job step, run as the job's user, for the jobs that ask for it (HARMONIA_NODE_AGENT=1
# in the job's environment, or `#BB_LUA jobdw ... node_agent=yes`).
#
# Install this one script as all four of slurm.conf's
#   Prolog=/etc/slurm/harmonia-node-agent.sh      (root, per node, before the job's first step:
#                                                 makes the job's directory, 0700, the user's)
#   TaskProlog=/etc/slurm/harmonia-node-agent.sh  (the user, per task: starts the step's agent
#                                                 once per node and exports HARMONIA_AGENT)
#   TaskEpilog=/etc/slurm/harmonia-node-agent.sh  (the user, per task: the step's last task on
#                                                 the node stops the agent)
#   Epilog=/etc/slurm/harmonia-node-agent.sh      (root, per node, at the job's end: stops the
#                                                 agents left by their PIDs, removes the directory)
# (a site with Prolog/Epilog scripts of its own uses Slurm's globs, e.g. /etc/slurm/prolog.d/*),
# and set the two paths below; `harmonia cluster up` writes both for its own cluster.
# It never fails a job or drains a node: when the agent cannot start, the ranks keep
# HARMONIA_SCHEDD and speak to harmonia-schedd directly.

HARMONIA_AGENTD="/usr/local/bin/harmonia-agentd"
HARMONIA_AGENT_DIR="/run/harmonia-agents"

# The job's directory on this node; the node name keeps several slurmd of one host apart.
job_dir="$HARMONIA_AGENT_DIR/${SLURM_JOB_ID:-none}.${SLURMD_NODENAME:-node}"

log() {
	# Root's scripts only: the base directory is root's.
	echo "$(date '+%F %T') job ${SLURM_JOB_ID:-?} on ${SLURMD_NODENAME:-?}: $*" \
		>>"$HARMONIA_AGENT_DIR/node-agent.log" 2>/dev/null
}

# Whether process $1 runs (a zombie does not: it has exited, unreaped).
running() {
	state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

prolog() {
	[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_UID:-}" ] || return 0
	if ! mkdir -p -m 0755 "$HARMONIA_AGENT_DIR" 2>/dev/null; then
		echo "harmonia-node-agent: cannot make $HARMONIA_AGENT_DIR" >&2
		return 0
	fi
	# Users must not be able to swap a job's directory: the base is root's and closed to writes.
	if [ -L "$HARMONIA_AGENT_DIR" ] || [ "$(stat -c %u "$HARMONIA_AGENT_DIR")" != 0 ] ||
		[ -n "$(find "$HARMONIA_AGENT_DIR" -maxdepth 0 -perm /022)" ]; then
		echo "harmonia-node-agent: $HARMONIA_AGENT_DIR must be root's and not writable by others" >&2
		return 0
	fi
	rm -rf "$job_dir" # an earlier run of this job id (requeued) that no Epilog cleared
	if mkdir -m 0700 "$job_dir" && chown "$SLURM_JOB_UID${SLURM_JOB_GID:+:$SLURM_JOB_GID}" "$job_dir"; then
		log "prolog: made $job_dir for uid $SLURM_JOB_UID"
	else
		log "prolog: cannot make $job_dir; the job's ranks will speak to harmonia-schedd directly"
		rm -rf "$job_dir"
	fi
	return 0
}

# Prints the TaskProlog's lines for slurmstepd: `export`/`unset` set the task's environment,
# `print` goes to the job's output.
task_prolog() {
	case "${HARMONIA_NODE_AGENT:-0}" in
	0 | no | "") return 0 ;;
	1 | yes) ;;
	*)
		echo "print harmonia: HARMONIA_NODE_AGENT=$HARMONIA_NODE_AGENT: expected 1 or 0; no node agent"
		echo "unset HARMONIA_AGENT"
		return 0
		;;
	esac
	step="${SLURM_STEP_ID:-batch}"
	socket="$job_dir/$step.sock"
	why=""
	if [ -z "${HARMONIA_SCHEDD:-}" ]; then
		why="HARMONIA_SCHEDD is not set"
	elif [ -L "$job_dir" ] || [ ! -d "$job_dir" ] || [ ! -O "$job_dir" ]; then
		why="$job_dir is not this user's directory (is this script the Prolog too?)"
	elif [ ! -w "$job_dir" ]; then
		why="$job_dir is not writable"
	elif ! start_agent "$step" "$socket"; then
		why="harmonia-agentd did not start ($(tail -n 1 "$job_dir/$step.log" 2>/dev/null))"
	fi
	if [ -n "$why" ]; then
		echo "print harmonia: no node agent on ${SLURMD_NODENAME:-this node}: $why; speaking to harmonia-schedd directly"
		echo "unset HARMONIA_AGENT"
		return 0
	fi
	echo "export HARMONIA_AGENT=$socket"
}

# Starts the step's agent unless one runs (the step's other tasks on this node share it): under
# a lock, since those tasks' prologs run at the same time. Succeeds once it listens. Each task
# adds a line to STEP.tasks, which its TaskEpilog takes away.
start_agent() {
	(
		flock -w 10 9 || exit 1
		pid=$(cat "$job_dir/$1.pid" 2>/dev/null)
		if [ -n "$pid" ] && running "$pid" && [ -S "$2" ]; then
			echo "${SLURM_PROCID:-0}" >>"$job_dir/$1.tasks"
			exit 0
		fi
		rm -f "$2"
		# In a session of its own: slurmstepd stops this script's process group when it ends.
		# Its output goes to a file (slurmstepd reads this script's until it closes), and it must
		# not hold the lock.
		setsid "$HARMONIA_AGENTD" --socket "$2" --schedd "$HARMONIA_SCHEDD" \
			</dev/null >>"$job_dir/$1.log" 2>&1 9>&- &
		echo $! >"$job_dir/$1.pid"
		tries=0 # it listens within milliseconds: wait 10 ms at a time, at most 5 s
		while [ ! -S "$2" ] && running $! && [ $tries -lt 500 ]; do
			sleep 0.01
			tries=$((tries + 1))
		done
		[ -S "$2" ] && running $! && echo "${SLURM_PROCID:-0}" >"$job_dir/$1.tasks"
	) 9>>"$job_dir/$1.lock"
}

# The step's last task on this node stops its agent (the Epilog stops any left at the job's end).
task_epilog() {
	step="${SLURM_STEP_ID:-batch}"
	[ -f "$job_dir/$step.tasks" ] && [ -O "$job_dir" ] && [ -w "$job_dir" ] || return 0
	(
		flock -w 10 9 || exit 0
		grep -vx "${SLURM_PROCID:-0}" "$job_dir/$step.tasks" >"$job_dir/$step.left"
		mv "$job_dir/$step.left" "$job_dir/$step.tasks"
		[ -s "$job_dir/$step.tasks" ] && exit 0
		pid=$(cat "$job_dir/$step.pid" 2>/dev/null)
		[ -n "$pid" ] && stop "$pid"
		rm -f "$job_dir/$step.pid" "$job_dir/$step.tasks"
	) 9>>"$job_dir/$step.lock"
}

# Stops harmonia-agentd $1: SIGTERM (it prints its message counts to its log), SIGKILL after 5 s.
stop() {
	kill -TERM "$1" 2>/dev/null
	tries=0
	while running "$1" && [ $tries -lt 500 ]; do
		sleep 0.01
		tries=$((tries + 1))
	done
	running "$1" || return 0
	kill -KILL "$1" 2>/dev/null
	return 1
}

epilog() {
	[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_UID:-}" ] || return 0
	[ -d "$job_dir" ] && [ ! -L "$job_dir" ] || return 0
	for pid_file in "$job_dir"/*.pid; do
		[ -f "$pid_file" ] && [ ! -L "$pid_file" ] || continue
		# The user may swap the file for a FIFO after the test above: never wait on it.
		pid=$(timeout 2 head -c 16 "$pid_file" | tr -cd 0-9)
		[ -n "$pid" ] || continue
		# The file is the user's to write: stop only a process of the job's user whose command
		# line names this job's directory (a PID reused since is left alone).
		[ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$SLURM_JOB_UID" ] || continue
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--socket $job_dir/" || continue
		if stop "$pid"; then
			log "epilog: stopped harmonia-agentd pid $pid"
		else
			log "epilog: harmonia-agentd pid $pid did not stop on SIGTERM; killed"
		fi
	done
	rm -rf "$job_dir"
	return 0
}

# The task hooks run with the job's environment: neither they nor the agent run under
# libharmonia (the agent's own socket and log are no job I/O).
case "${SLURM_SCRIPT_CONTEXT:-}" in
prolog_slurmd) prolog ;;
prolog_task) unset LD_PRELOAD && task_prolog ;;
epilog_task) unset LD_PRELOAD && task_epilog ;;
epilog_slurmd) epilog ;;
*) echo "harmonia-node-agent: unknown SLURM_SCRIPT_CONTEXT '${SLURM_SCRIPT_CONTEXT:-}'" >&2 ;;
esac
exit 0
