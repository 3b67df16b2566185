#!/usr/bin/env bash
# A base image like gcr.io/distroless/cc-debian12:nonroot, made from the same Debian 12 packages,
# for a machine that cannot pull it (no registry, an air gap): the test suite builds
# deploy/Dockerfile's runtime stage on it (--build-arg RUNTIME_IMAGE=…). Distroless is itself
# made this way: each package's files extracted (no maintainer script runs, so no shell is
# needed or left), then what those scripts would have done, done here.
#
#   deploy/base-image.sh [IMAGE]      default IMAGE=localhost/outbox-archiver-base:cc-debian12
#
# Needs a Debian 12 host (apt-get download, dpkg-deb, ldconfig), root, and podman — or
# CONTAINER_TOOL=docker — to import the root filesystem. About 8 MB of packages; 14 MB image.
set -euo pipefail

IMAGE=${1:-localhost/outbox-archiver-base:cc-debian12}
TOOL=${CONTAINER_TOOL:-podman}
# What distroless cc-debian12 holds: its `static` layer (base-files, netbase, tzdata,
# ca-certificates, the users), `base` (libc6, libssl3) and `cc` (libgcc-s1, libgomp1, libstdc++6).
PACKAGES=(base-files netbase tzdata ca-certificates libc6 libssl3 libgcc-s1 libgomp1 libstdc++6)

work=$(mktemp -d "${TMPDIR:-/tmp}/outbox-archiver-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/rootfs"
R=$work/rootfs

# As root, apt's download sandbox user (_apt) cannot write to the directory: download as root.
download() { (cd "$work/debs" && apt-get download -qq -o APT::Sandbox::User=root "${PACKAGES[@]}" >/dev/null); }
download 2>/dev/null || { apt-get update -qq && download; }
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$R"; done

# ca-certificates' postinst (update-ca-certificates): the bundle every TLS stack reads.
mkdir -p "$R/etc/ssl/certs"
cat "$R"/usr/share/ca-certificates/mozilla/*.crt > "$R/etc/ssl/certs/ca-certificates.crt"
# tzdata's: UTC.
ln -sf /usr/share/zoneinfo/Etc/UTC "$R/etc/localtime"
echo Etc/UTC > "$R/etc/timezone"
# Distroless's users: root, nobody and nonroot (65532), with no login shell.
cat > "$R/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat > "$R/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
EOF
echo 'hosts: files dns' > "$R/etc/nsswitch.conf"
install -d -m 0700 "$R/root"
install -d -m 0700 -o 65532 -g 65532 "$R/home/nonroot"
install -d -m 1777 "$R/tmp"
install -d "$R/proc" "$R/sys" "$R/dev" "$R/var/lib/dpkg/status.d"
# libc6's: the dynamic linker's cache.
ldconfig -r "$R"
# What distroless leaves out: documentation, locales, the packages' few programs (no shell).
rm -rf "$R"/usr/share/{doc,man,info,lintian,locale,common-licenses,bug,gcc,gdb} \
       "$R"/usr/share/zoneinfo/{posix,right} "$R"/usr/lib/*-linux-gnu/{gconv,engines-3,ossl-modules} \
       "$R"/etc/update-motd.d "$R"/usr/sbin/update-ca-certificates \
       "$R"/usr/share/base-files/{motd,profile,profile.md5sum,dot.*}
rm -f "$R"/sbin/ldconfig "$R"/usr/bin/{getconf,getent,iconv,ldd,locale,localedef,pldd,tzselect,zdump,catchsegv,sotruss,sprof} \
      "$R"/usr/sbin/{iconvconfig,zic}
# One status file per package, as distroless keeps them for image scanners.
for deb in "$work"/debs/*.deb; do
  dpkg-deb -f "$deb" > "$R/var/lib/dpkg/status.d/$(dpkg-deb -f "$deb" Package)"
done

# The image's configuration, as distroless's nonroot variant sets it.
quiet=(); [ "$TOOL" = podman ] && quiet=(--quiet)
tar --numeric-owner -C "$R" -c . | "$TOOL" import "${quiet[@]}" \
  --change 'USER 65532:65532' \
  --change 'WORKDIR /home/nonroot' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --message "distroless-like cc-debian12 from $(cd "$work/debs" && echo *.deb)" \
  - "$IMAGE" >/dev/null
echo "$IMAGE: $(cd "$work/debs" && echo *.deb)"
