# shellcheck shell=bash
# The recipe of microbatch-local/base:<suite>, sourced by ci-docker.sh. The base image's input
# hash is this file plus the suite and mirror in effect: only what changes the base rebuilds it
# (a debootstrap of about 70 s), an edit elsewhere in ci-docker.sh does not.

DEBIAN_SUITE=${MICROBATCH_DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${MICROBATCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=(postgresql-15 openjdk-17-jre-headless)
# The image configuration `docker import` gives the rootfs (besides the labels).
# shellcheck disable=SC2034  # used by ci-docker.sh
BASE_CHANGES=(
	'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	'CMD ["/bin/bash"]'
)

make_rootfs() { # make_rootfs ROOTFS LOG: debootstrap the base into ROOTFS and trim it
	local rootfs=$1 log=$2 packages
	packages=$(
		IFS=,
		echo "${BASE_PACKAGES[*]}"
	)
	debootstrap --variant=minbase --include="$packages" "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" \
		>"$log" 2>&1 || {
		tail -n 30 "$log" >&2
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
