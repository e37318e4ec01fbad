#!/usr/bin/env bash
# A Docker engine and local Kafka and PostgreSQL images for a machine without registry access.
#
#   integration/docker/ci-docker.sh COMMAND...   (commands run in order; see README.md here)
#
#   engine     unless a Docker daemon already answers, start dockerd (installing first what is
#              missing of Debian's docker.io and debootstrap); report testkit containers left
#              by an earlier run (removed on a daemon this script started)
#   images     build microbatch-local/postgres:15 and microbatch-local/kafka:<version> from a
#              debootstrapped Debian base, with no registry pull; skipped while their inputs
#              are unchanged
#   env        print the environment for running the suite against them (for eval)
#   stop       stop the dockerd that `engine` started, nothing else
#   leftovers  fail when containers, build folders or dangling images of the testkit or of
#              this script are left, or a process `stop` stopped outlives it
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"

DOCKERD_FLAGS=${MICROBATCH_DOCKERD_FLAGS:---bridge=none --iptables=false --ip6tables=false}
STATE_DIR=${MICROBATCH_DOCKER_STATE_DIR:-/run/microbatch-docker}
case $STATE_DIR in /*) ;; *) STATE_DIR=$PWD/$STATE_DIR ;; esac # it is in dockerd's command line
TMP_ROOT=${TMPDIR:-/tmp}
BUILD_PREFIX=microbatch-docker-build.
# shellcheck source-path=SCRIPTDIR source=base.sh
. "$here/base.sh" # DEBIAN_SUITE, DEBIAN_MIRROR, BASE_PACKAGES, BASE_CHANGES, make_rootfs
PYTHON=${PYTHON:-$repo/.venv/bin/python}
case $PYTHON in /*) ;; */*) PYTHON=$PWD/$PYTHON ;; esac # the commands run from the repository

BASE_IMAGE=microbatch-local/base:$DEBIAN_SUITE
POSTGRES_IMAGE=microbatch-local/postgres:15
KAFKA_REPOSITORY=microbatch-local/kafka
IMAGE_LABEL=org.microbatch.local-image # on every image built here (children inherit it)
INPUTS_LABEL=org.microbatch.local-image.inputs # the hash of the image's inputs
OWNER_LABEL=org.microbatch.testkit.owner       # on every container the testkit starts

say() { printf 'ci-docker: %s\n' "$*"; }
fail() {
	printf 'ci-docker: error: %s\n' "$*" >&2
	exit 1
}
usage() {
	sed -n '2,15s/^# \{0,1\}//p' "$self" >&2
	exit 2
}

# --- the engine --------------------------------------------------------------------------------

daemon_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

POLICY_RC=/usr/sbin/policy-rc.d
policy_added=""
remove_policy() {
	[ -z "$policy_added" ] || rm -f "$POLICY_RC"
	policy_added=""
}

apt_install() {
	command -v apt-get >/dev/null || fail "apt-get is missing: install $* by hand"
	[ "$(id -u)" = 0 ] || fail "installing $* needs root (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	local status=0
	if [ ! -e "$POLICY_RC" ]; then # no service autostart while installing
		policy_added=1             # removed below, or by on_exit if this script is stopped
		printf '#!/bin/sh\nexit 101\n' >"$POLICY_RC" && chmod +x "$POLICY_RC"
	fi
	say "installing $* (apt-get)"
	{
		apt-get update -qq &&
			apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "$@"
	} || status=$?
	remove_policy
	[ "$status" -eq 0 ] || fail "apt-get could not install $* (status $status)"
}

proc_start() { # proc_start PID: when PID started (clock ticks since boot); fails when it is gone
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	read -ra stat <<<"${stat##*) }" # the fields after the command name, from the third
	echo "${stat[19]}"
}

has_arg() { # has_arg PID ARG: PID's command line has the word ARG
	grep -qxF -- "$2" <<<"$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline")"
}

ours_dockerd() { # ours_dockerd PID: PID runs a dockerd this script started (our --pidfile)
	[ -n "${1:-}" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = dockerd ] &&
		has_arg "$1" "--pidfile=$STATE_DIR/dockerd.pid"
}

started_pid() { # the dockerd this script started, when it still runs
	local pid
	pid=$(cat "$STATE_DIR/started.pid" 2>/dev/null || true)
	if ours_dockerd "$pid"; then echo "$pid"; fi
}

cmd_engine() {
	if daemon_answers; then
		say "a Docker daemon answers ($(docker version --format 'server {{.Server.Version}}')): nothing to start"
		stale_containers
		return
	fi
	# (not `docker version | grep -q`: with pipefail its status would be docker's failure)
	if command -v docker >/dev/null && grep -qi 'permission denied' <<<"$(docker version 2>&1 || true)"; then
		fail "a Docker daemon runs but this user may not use its socket (join the docker group)"
	fi
	local missing=()
	command -v dockerd >/dev/null || missing+=(docker.io)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
	command -v docker >/dev/null || fail "no docker command after installing docker.io"
	[ "$(id -u)" = 0 ] || fail "starting dockerd needs root"
	local pid
	pid=$(started_pid)
	if [ -n "$pid" ]; then
		fail "the dockerd started here (pid $pid) runs but does not answer; see $STATE_DIR/dockerd.log"
	fi
	# What an earlier run left (killed, or its daemon died): a pidfile naming a pid that another
	# process may have reused makes dockerd refuse to start; old stopped pids are not ours now.
	rm -f "$STATE_DIR/dockerd.pid" "$STATE_DIR/started.pid" "$STATE_DIR/stopped.pids"
	mkdir -p "$STATE_DIR"
	local started=$SECONDS
	# Our own --pidfile marks the process as started by this script (see `leftovers`).
	# shellcheck disable=SC2086  # the flags are words on purpose
	setsid dockerd $DOCKERD_FLAGS --pidfile="$STATE_DIR/dockerd.pid" \
		</dev/null >"$STATE_DIR/dockerd.log" 2>&1 &
	pid=$!
	echo "$pid" >"$STATE_DIR/started.pid"
	say "started dockerd $DOCKERD_FLAGS (pid $pid, log $STATE_DIR/dockerd.log)"
	local deadline=$((SECONDS + 60))
	until daemon_answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$STATE_DIR/dockerd.log" >&2 || true
			rm -f "$STATE_DIR/started.pid"
			fail "dockerd exited at start (its log above)"
		fi
		if [ $SECONDS -ge $deadline ]; then
			tail -n 20 "$STATE_DIR/dockerd.log" >&2 || true
			fail "dockerd (pid $pid) did not answer within 60 s (its log above)"
		fi
		sleep 0.5
	done
	# dockerd writes its pidfile itself; keep the pid we know in case it has not yet.
	[ -s "$STATE_DIR/dockerd.pid" ] || echo "$pid" >"$STATE_DIR/dockerd.pid"
	say "dockerd answers ($(docker version --format 'server {{.Server.Version}}')) after $((SECONDS - started)) s"
	stale_containers
}

owner_alive() { # owner_alive TOKEN: the provider's watcher of TOKEN's process runs on this host
	pgrep -f "_docker_reaper\.py $1\$" >/dev/null
}

stale_containers() {
	# Testkit containers an earlier, killed run left (their owner's watcher is gone too). On a
	# daemon this script started they are removed; on any other daemon they are only reported,
	# and `leftovers` leaves the ones listed in $STATE_DIR/existing.ids out of its check.
	local found id token ours="" left=()
	found=$(docker ps -a --filter "label=$OWNER_LABEL" --format "{{.ID}} {{.Label \"$OWNER_LABEL\"}}")
	[ -n "$(started_pid)" ] && ours=1
	while read -r id token; do
		[ -n "$id" ] || continue
		if [ -n "$ours" ] && ! owner_alive "$token"; then
			docker rm -f -v "$id" >/dev/null || fail "could not remove the old testkit container $id"
			say "removed the testkit container $id an earlier run left"
		else
			say "warning: the testkit container $id exists before this run${ours:+ (its owner runs)}; left as it is"
			left+=("$id")
		fi
	done <<<"$found"
	if mkdir -p "$STATE_DIR" 2>/dev/null; then
		printf '%s\n' "${left[@]}" >"$STATE_DIR/existing.ids"
	fi
}

children_named() { # children_named PID NAME: the pids of PID's children running NAME
	local child children=()
	read -ra children <<<"$(cat "/proc/$1/task/"*/children 2>/dev/null | tr '\n' ' ')"
	for child in "${children[@]}"; do
		[ "$(cat "/proc/$child/comm" 2>/dev/null)" = "$2" ] && echo "$child"
	done
	return 0
}

wait_gone() { # wait_gone SECONDS PID...: true when every PID has exited in time
	local deadline=$((SECONDS + $1)) pid alive
	shift
	while :; do
		alive=""
		for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && return 0
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

shims_of() { # shims_of CONTAINERD_PID: the pids of the container shims that containerd runs
	# (a shim leaves containerd's process tree; its -address is containerd's own socket)
	local config socket pid
	config=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" || true)
	config=$(sed -n '/^--config$/{n;p;q}' <<<"$config")
	[ -n "$config" ] || return 0
	socket="$(dirname "$config")/containerd.sock"
	for pid in $(pgrep -f 'containerd-shim' || true); do
		has_arg "$pid" "$socket" && echo "$pid"
	done
	return 0
}

cmd_stop() {
	local pid recorded
	recorded=$(cat "$STATE_DIR/started.pid" 2>/dev/null || true)
	if [ -z "$recorded" ]; then
		say "no dockerd was started by this script: nothing to stop"
		return
	fi
	pid=$(started_pid)
	if [ -z "$pid" ]; then # gone, or the pid now belongs to another process: never kill it
		say "the dockerd started by this script (pid $recorded) is no longer running"
		rm -f "$STATE_DIR/started.pid" "$STATE_DIR/dockerd.pid"
		return
	fi
	local containerd="" shims="" child
	for child in $(children_named "$pid" containerd); do
		containerd="$containerd $child"
		shims="$shims $(shims_of "$child" | tr '\n' ' ')"
	done
	read -ra containerd <<<"$containerd"
	read -ra shims <<<"$shims"
	# Each process with its start time: a pid reused later is not mistaken for one of these.
	local stopped="" p
	for p in "$pid" "${containerd[@]}" "${shims[@]}"; do
		stopped="$stopped $p:$(proc_start "$p" || echo gone)"
	done
	say "stopping dockerd (pid $pid${containerd[0]:+, its containerd ${containerd[*]}}${shims[0]:+, container shims ${shims[*]}})"
	kill -TERM "$pid"
	if ! wait_gone 60 "$pid"; then
		say "dockerd (pid $pid) still runs 60 s after SIGTERM: killing it"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone 10 "$pid" || fail "dockerd (pid $pid) does not exit"
	fi
	# dockerd stops the containerd it started; make sure of it.
	if [ ${#containerd[@]} -gt 0 ] && ! wait_gone 15 "${containerd[@]}"; then
		kill -TERM "${containerd[@]}" 2>/dev/null || true
		wait_gone 15 "${containerd[@]}" || fail "containerd (${containerd[*]}) does not exit"
	fi
	echo "${stopped# }" >"$STATE_DIR/stopped.pids"
	rm -f "$STATE_DIR/started.pid" "$STATE_DIR/dockerd.pid"
	say "dockerd stopped"
}

# --- the images --------------------------------------------------------------------------------

kafka_version() {
	if [ -n "${MICROBATCH_KAFKA_VERSION:-}" ]; then
		echo "$MICROBATCH_KAFKA_VERSION"
		return
	fi
	command -v "$PYTHON" >/dev/null || fail "no Python at $PYTHON (set PYTHON, or run make install first)"
	"$PYTHON" -c 'from microbatch_testkit.services import DEFAULT_KAFKA_VERSION; print(DEFAULT_KAFKA_VERSION)' ||
		fail "could not read DEFAULT_KAFKA_VERSION from microbatch_testkit.services with $PYTHON"
}

kafka_jars() { # kafka_jars VERSION: the folder of the broker's jars (downloaded once)
	command -v "$PYTHON" >/dev/null || fail "no Python at $PYTHON (set PYTHON, or run make install first)"
	"$PYTHON" -c 'import sys; from microbatch_testkit.services import fetch_kafka_jars; print(fetch_kafka_jars(sys.argv[1]))' "$1" ||
		fail "could not get the Kafka $1 jars (microbatch_testkit.services.fetch_kafka_jars)"
}

image_is_current() { # image_is_current IMAGE HASH (never with MICROBATCH_IMAGES_REBUILD=1)
	[ "${MICROBATCH_IMAGES_REBUILD:-}" != 1 ] && [ -n "$(docker images -q --filter "label=$INPUTS_LABEL=$2" "$1" 2>/dev/null)" ]
}

build_dir=""
cleanup() { # the build folder of `images`
	[ -n "$build_dir" ] && [ -d "$build_dir" ] || return 0
	# debootstrap mounts /proc and /sys in the rootfs; a failed run may leave them mounted.
	local mount
	awk -v dir="$build_dir/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r |
		while IFS= read -r mount; do umount -l "$mount" 2>/dev/null || true; done
	rm -rf --one-file-system "$build_dir"
}

step() { # step WHAT COMMAND...: run COMMAND and print how long it took
	local began=$SECONDS
	say "$1..."
	shift
	"$@"
	say "  done in $((SECONDS - began)) s"
}

import_base() { # import_base ROOTFS HASH
	local change changes=(--change "LABEL $IMAGE_LABEL=ci-docker $INPUTS_LABEL=$2")
	for change in "${BASE_CHANGES[@]}"; do changes+=(--change "$change"); done
	tar -C "$1" --numeric-owner -c . | docker import "${changes[@]}" - "$BASE_IMAGE" >/dev/null
}

build_image() { # build_image TAG HASH CONTEXT: the classic builder, local images only
	# (its "legacy builder is deprecated" notice is shown only when the build fails)
	DOCKER_BUILDKIT=0 docker build --quiet --rm --force-rm --pull=false \
		--build-arg "BASE=$BASE_IMAGE" --label "$INPUTS_LABEL=$2" -t "$1" "$3" \
		>/dev/null 2>"$build_dir/build.log" || {
		cat "$build_dir/build.log" >&2
		fail "docker build $1 failed (its output above)"
	}
}

remove_dangling() { # what an earlier build of this script's images left behind
	local id ids users kept="" removed=1
	while [ -n "$removed" ]; do # removing an image can leave its parent dangling
		removed=""
		ids=$(docker images -q --filter dangling=true --filter "label=$IMAGE_LABEL" | sort -u)
		for id in $ids; do
			case " $kept " in *" $id "*) continue ;; esac
			users=$(docker ps -aq --filter "ancestor=$id" | tr '\n' ' ')
			if [ -n "$users" ]; then
				say "kept the old image $id: containers ${users% } use it"
				kept="$kept $id"
			elif docker rmi "$id" >/dev/null; then
				say "removed the old image $id"
				removed=1
			fi
		done
	done
}

remove_old_kafka() { # remove_old_kafka TAG: older tags of microbatch-local/kafka built here
	local current=${1##*:} ref id version users
	while read -r ref id; do
		[ -n "$id" ] || continue
		version=${ref##*:}
		case $version in "$current" | "<none>") continue ;; esac
		# older: sorts before the current version
		[ "$(printf '%s\n%s\n' "$version" "$current" | sort -V | head -n 1)" = "$version" ] || continue
		users=$(docker ps -aq --filter "ancestor=$id" | tr '\n' ' ')
		if [ -n "$users" ]; then
			say "kept the older $ref: containers ${users% } use it"
		elif docker rmi "$ref" >/dev/null; then
			say "removed the older $ref"
		fi
	done <<<"$(docker images --filter "label=$IMAGE_LABEL" --format '{{.Repository}}:{{.Tag}} {{.ID}}' "$KAFKA_REPOSITORY")"
}

cmd_images() {
	daemon_answers || fail "no Docker daemon answers (run \`$0 engine\` first)"
	local total=$SECONDS version jars
	version=$(kafka_version)
	local kafka_image=$KAFKA_REPOSITORY:$version
	local began=$SECONDS
	jars=$(kafka_jars "$version")
	[ -d "$jars" ] || fail "no Kafka jar folder at $jars"
	say "Kafka $version jars: $jars ($((SECONDS - began)) s)"

	local base_hash pg_hash kafka_hash
	base_hash=$({ # what makes the base: its recipe and the settings it reads
		cat "$here/base.sh"
		echo "$DEBIAN_SUITE $DEBIAN_MIRROR ${BASE_PACKAGES[*]} $IMAGE_LABEL"
	} | sha256sum | cut -c1-32)
	pg_hash=$({
		echo "$base_hash"
		cat "$here/postgres/Dockerfile" "$here/postgres/entrypoint"
	} | sha256sum | cut -c1-32)
	kafka_hash=$({
		echo "$base_hash $version"
		cat "$here/kafka/Dockerfile" "$here/kafka/run" "$here/kafka/log4j2.xml"
		(cd "$jars" && sha256sum -- *.jar)
	} | sha256sum | cut -c1-32)

	if image_is_current "$POSTGRES_IMAGE" "$pg_hash" && image_is_current "$kafka_image" "$kafka_hash"; then
		say "$POSTGRES_IMAGE and $kafka_image are current (inputs $pg_hash, $kafka_hash): nothing to build"
		remove_dangling
		return
	fi
	build_dir=$(mktemp -d "$TMP_ROOT/${BUILD_PREFIX}XXXXXX") # removed by on_exit on a failure
	if image_is_current "$BASE_IMAGE" "$base_hash"; then
		say "$BASE_IMAGE is current (inputs $base_hash)"
	else
		command -v debootstrap >/dev/null || apt_install debootstrap
		[ "$(id -u)" = 0 ] || fail "debootstrap needs root"
		step "debootstrap $DEBIAN_SUITE minbase with ${BASE_PACKAGES[*]}" \
			make_rootfs "$build_dir/rootfs" "$build_dir/debootstrap.log"
		step "docker import $BASE_IMAGE ($(du -sh "$build_dir/rootfs" | cut -f1))" \
			import_base "$build_dir/rootfs" "$base_hash"
		rm -rf --one-file-system "$build_dir/rootfs"
	fi
	if image_is_current "$POSTGRES_IMAGE" "$pg_hash"; then
		say "$POSTGRES_IMAGE is current (inputs $pg_hash)"
	else
		mkdir "$build_dir/postgres"
		cp "$here/postgres/Dockerfile" "$here/postgres/entrypoint" "$build_dir/postgres/"
		chmod 755 "$build_dir/postgres/entrypoint"
		step "docker build $POSTGRES_IMAGE" build_image "$POSTGRES_IMAGE" "$pg_hash" "$build_dir/postgres"
	fi
	if image_is_current "$kafka_image" "$kafka_hash"; then
		say "$kafka_image is current (inputs $kafka_hash)"
	else
		mkdir "$build_dir/kafka"
		cp "$here/kafka/Dockerfile" "$here/kafka/run" "$here/kafka/log4j2.xml" "$build_dir/kafka/"
		mkdir "$build_dir/kafka/libs" # the jars only: what the hash covers
		cp "$jars"/*.jar "$build_dir/kafka/libs/"
		chmod 755 "$build_dir/kafka/run"
		step "docker build $kafka_image" build_image "$kafka_image" "$kafka_hash" "$build_dir/kafka"
		remove_old_kafka "$kafka_image"
	fi
	remove_dangling
	cleanup
	build_dir=""
	say "images ready in $((SECONDS - total)) s: $POSTGRES_IMAGE, $kafka_image"
}

# --- the environment and the checks ------------------------------------------------------------

cmd_env() {
	local version
	version=$(kafka_version)
	cat <<EOF
export MICROBATCH_SERVICES=docker
export MICROBATCH_DOCKER_NETWORK=host
export TESTCONTAINERS_RYUK_DISABLED=true
export MICROBATCH_KAFKA_IMAGE=microbatch-local/kafka:$version
export MICROBATCH_POSTGRES_IMAGE=$POSTGRES_IMAGE
EOF
}

cmd_leftovers() {
	local problems=0 found
	found=$(find "$TMP_ROOT" -maxdepth 1 -name "${BUILD_PREFIX}*" 2>/dev/null || true)
	if [ -n "$found" ]; then
		printf 'ci-docker: build folders left: %s\n' "$found" >&2
		problems=1
	fi
	if daemon_answers; then
		local existing # reported by `engine`: there before this run, not its leftovers
		existing=$(cat "$STATE_DIR/existing.ids" 2>/dev/null || true)
		found=$(docker ps -a --filter "label=$OWNER_LABEL" --format '{{.ID}} {{.Image}} {{.Status}} {{.Names}}' |
			grep -vF "${existing:-no such id}" || true)
		if [ -n "$found" ]; then
			printf 'ci-docker: testkit containers left (label %s):\n%s\n' "$OWNER_LABEL" "$found" >&2
			problems=1
		fi
		found=$(docker images --filter dangling=true --filter "label=$IMAGE_LABEL" --format '{{.ID}} {{.CreatedSince}}')
		if [ -n "$found" ]; then
			printf 'ci-docker: dangling images of this script left:\n%s\n' "$found" >&2
			problems=1
		fi
	else
		say "no Docker daemon answers: containers and images not checked"
	fi
	if [ -z "$(started_pid)" ]; then # stopped (or never started): nothing of it may remain
		local entry pid start stopped=()
		read -ra stopped <<<"$(cat "$STATE_DIR/stopped.pids" 2>/dev/null || true)"
		for entry in "${stopped[@]}"; do
			pid=${entry%%:*} start=${entry#*:}
			if [ "$(proc_start "$pid" || true)" = "$start" ]; then # the same process, not a reused pid
				printf 'ci-docker: process %s (%s) stopped by this script still runs\n' \
					"$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)" >&2
				problems=1
			fi
		done
		for pid in $(pgrep -x dockerd || true); do
			if ours_dockerd "$pid"; then
				printf 'ci-docker: dockerd %s started by this script still runs\n' "$pid" >&2
				problems=1
			fi
		done
	fi
	[ $problems -eq 0 ] || fail "leftovers found (above)"
	say "no leftovers: no testkit container, build folder, dangling image or stopped process"
}

[ $# -gt 0 ] || usage
for command in "$@"; do
	case $command in
	engine | images | env | stop | leftovers) ;;
	*)
		printf 'ci-docker: unknown command %q\n' "$command" >&2
		usage
		;;
	esac
done
on_exit() {
	remove_policy
	cleanup
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$repo"
for command in "$@"; do
	"cmd_$command"
done
