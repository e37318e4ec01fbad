#!/usr/bin/env bash
# A Docker engine and local Kafka and PostgreSQL images for a machine without registry access.
#
#   integration/docker/ci-docker.sh COMMAND...   (commands run in order; see README.md here)
#
#   engine     start dockerd (installing Debian's docker.io first when dockerd is missing)
#              unless a Docker daemon already answers
#   images     build microbatch-local/postgres:15 and microbatch-local/kafka:<version> from a
#              debootstrapped Debian base, with no registry pull; skipped while their inputs
#              are unchanged
#   env        print the environment for running the suite against them (for eval)
#   stop       stop the dockerd that `engine` started, nothing else
#   leftovers  fail when containers, build folders or dangling images of the testkit or of
#              this script are left, or a dockerd this script started outlives `stop`
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"

DOCKERD_FLAGS=${MICROBATCH_DOCKERD_FLAGS:---bridge=none --iptables=false --ip6tables=false}
STATE_DIR=${MICROBATCH_DOCKER_STATE_DIR:-/run/microbatch-docker}
TMP_ROOT=${TMPDIR:-/tmp}
BUILD_PREFIX=microbatch-docker-build.
DEBIAN_SUITE=${MICROBATCH_DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${MICROBATCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=(postgresql-15 openjdk-17-jre-headless)
PYTHON=${PYTHON:-$repo/.venv/bin/python}
case $PYTHON in /*) ;; */*) PYTHON=$PWD/$PYTHON ;; esac # the commands run from the repository

BASE_IMAGE=microbatch-local/base:$DEBIAN_SUITE
POSTGRES_IMAGE=microbatch-local/postgres:15
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

apt_install() {
	command -v apt-get >/dev/null || fail "apt-get is missing: install $* by hand"
	[ "$(id -u)" = 0 ] || fail "installing $* needs root (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	local policy=/usr/sbin/policy-rc.d added=""
	if [ ! -e "$policy" ]; then # no service autostart while installing
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added=1
	fi
	say "installing $* (apt-get)"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "$@" ||
		{
			[ -z "$added" ] || rm -f "$policy"
			fail "apt-get could not install $*"
		}
	[ -z "$added" ] || rm -f "$policy"
}

is_dockerd() { [ -n "${1:-}" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = dockerd ]; }
state_pid() { cat "$STATE_DIR/dockerd.pid" 2>/dev/null || true; }

cmd_engine() {
	if daemon_answers; then
		say "a Docker daemon answers ($(docker version --format 'server {{.Server.Version}}')): nothing to start"
		return
	fi
	if command -v docker >/dev/null && docker version 2>&1 | grep -qi 'permission denied'; then
		fail "a Docker daemon runs but this user may not use its socket (join the docker group)"
	fi
	local missing=()
	command -v dockerd >/dev/null || missing+=(docker.io)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
	command -v docker >/dev/null || fail "no docker command after installing docker.io"
	[ "$(id -u)" = 0 ] || fail "starting dockerd needs root"
	local pid
	pid=$(state_pid)
	if is_dockerd "$pid"; then
		fail "the dockerd started here (pid $pid) runs but does not answer; see $STATE_DIR/dockerd.log"
	fi
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

cmd_stop() {
	local pid
	pid=$(cat "$STATE_DIR/started.pid" 2>/dev/null || true)
	if [ -z "$pid" ]; then
		say "no dockerd was started by this script: nothing to stop"
		return
	fi
	if ! is_dockerd "$pid"; then
		say "the dockerd started by this script (pid $pid) is no longer running"
		rm -f "$STATE_DIR/started.pid" "$STATE_DIR/dockerd.pid"
		return
	fi
	local containerd
	containerd=$(children_named "$pid" containerd | tr '\n' ' ')
	say "stopping dockerd (pid $pid${containerd:+, its containerd ${containerd% }})"
	kill -TERM "$pid"
	if ! wait_gone 60 "$pid"; then
		say "dockerd (pid $pid) still runs 60 s after SIGTERM: killing it"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone 10 "$pid" || fail "dockerd (pid $pid) does not exit"
	fi
	# dockerd stops the containerd it started; make sure of it.
	# shellcheck disable=SC2086  # a list of pids
	if [ -n "$containerd" ] && ! wait_gone 15 $containerd; then
		kill -TERM $containerd 2>/dev/null || true
		wait_gone 15 $containerd || fail "containerd ($containerd) does not exit"
	fi
	echo "$pid $containerd" >"$STATE_DIR/stopped.pids"
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
cleanup() {
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

make_rootfs() {
	local rootfs=$1 packages
	packages=$(
		IFS=,
		echo "${BASE_PACKAGES[*]}"
	)
	debootstrap --variant=minbase --include="$packages" "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" \
		>"$build_dir/debootstrap.log" 2>&1 || {
		tail -n 30 "$build_dir/debootstrap.log" >&2
		fail "debootstrap $DEBIAN_SUITE failed (the end of its log above)"
	}
	# Trim what no container needs: package caches and lists, docs, man pages, translations
	# (the C.UTF-8 locale stays), and the cluster the postgresql package made for itself.
	chroot "$rootfs" apt-get clean
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
		"$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian "$rootfs"/var/log/*.log \
		"$rootfs"/var/log/apt/* "$rootfs"/etc/postgresql/15 "$rootfs"/var/lib/postgresql/15
	find "$rootfs/var/log" -type f -exec truncate -s 0 {} +
}

import_base() {
	tar -C "$1" --numeric-owner -c . | docker import \
		--change "LABEL $IMAGE_LABEL=ci-docker $INPUTS_LABEL=$2" \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/bash"]' \
		- "$BASE_IMAGE" >/dev/null
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

cmd_images() {
	daemon_answers || fail "no Docker daemon answers (run \`$0 engine\` first)"
	local total=$SECONDS version jars
	version=$(kafka_version)
	local kafka_image=microbatch-local/kafka:$version
	local began=$SECONDS
	jars=$(kafka_jars "$version")
	[ -d "$jars" ] || fail "no Kafka jar folder at $jars"
	say "Kafka $version jars: $jars ($((SECONDS - began)) s)"

	local base_hash pg_hash kafka_hash
	base_hash=$({
		cat "$self"
		echo "$DEBIAN_SUITE $DEBIAN_MIRROR ${BASE_PACKAGES[*]}"
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
	build_dir=$(mktemp -d "$TMP_ROOT/${BUILD_PREFIX}XXXXXX")
	trap cleanup EXIT
	if image_is_current "$BASE_IMAGE" "$base_hash"; then
		say "$BASE_IMAGE is current (inputs $base_hash)"
	else
		command -v debootstrap >/dev/null || apt_install debootstrap
		[ "$(id -u)" = 0 ] || fail "debootstrap needs root"
		step "debootstrap $DEBIAN_SUITE minbase with ${BASE_PACKAGES[*]}" make_rootfs "$build_dir/rootfs"
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
		cp -r "$jars" "$build_dir/kafka/libs"
		chmod 755 "$build_dir/kafka/run"
		step "docker build $kafka_image" build_image "$kafka_image" "$kafka_hash" "$build_dir/kafka"
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
		found=$(docker ps -a --filter "label=$OWNER_LABEL" --format '{{.ID}} {{.Image}} {{.Status}} {{.Names}}')
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
	if [ ! -e "$STATE_DIR/started.pid" ]; then # stopped (or never started): nothing may remain
		local pid stopped=()
		read -ra stopped <<<"$(cat "$STATE_DIR/stopped.pids" 2>/dev/null)"
		for pid in "${stopped[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then
				printf 'ci-docker: process %s (%s) stopped by this script still runs\n' \
					"$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)" >&2
				problems=1
			fi
		done
		for pid in $(pgrep -x dockerd || true); do
			if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--pidfile=$STATE_DIR/dockerd.pid"; then
				printf 'ci-docker: dockerd %s started by this script still runs\n' "$pid" >&2
				problems=1
			fi
		done
	fi
	[ $problems -eq 0 ] || fail "leftovers found (above)"
	say "no leftovers: no testkit container, build folder, dangling image or stray dockerd"
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
cd "$repo"
for command in "$@"; do
	"cmd_$command"
done
