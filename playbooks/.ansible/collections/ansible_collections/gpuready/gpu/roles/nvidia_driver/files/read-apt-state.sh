# shellcheck shell=sh
# What the driver role decides its apt tasks from, read in one command on the node; reads only.
# Arguments: the version-wildcard requests (NAME=GLOB) whose pinned candidate is asked for.
# Prints four sections:
#   dpkg    the packages dpkg knows (status, name, version, architecture; tab-separated)
#   policy  apt-cache policy: the enabled archives
#   offered apt-cache pkgnames of each prefix in the environment's GPUREADY_OFFERED
#   pinned  apt-cache policy of each requested package, its version wildcard pinned at 1001 as
#           ansible.builtin.apt pins it, next to the node's own pins (apt_preferences(5))
set -u
export LC_ALL=C
echo '### dpkg'
dpkg-query --show --showformat='${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n' || exit
echo '### policy'
apt-cache policy || exit
echo '### offered'
# The package names of each prefix in GPUREADY_OFFERED (the driver packages' families): which branches the index has.
for prefix in ${GPUREADY_OFFERED:-}; do
  apt-cache pkgnames "$prefix" | sort
done
echo '### pinned'
[ "$#" -gt 0 ] || exit 0
parts=$(mktemp -d) || exit
trap 'rm -rf "$parts"' EXIT
for pref in /etc/apt/preferences.d/*; do
  [ -e "$pref" ] && ln -s "$pref" "$parts/"
done
names=""
for request in "$@"; do
  printf 'Package: %s\nPin: version %s\nPin-Priority: 1001\n\n' "${request%%=*}" "${request#*=}" >> "$parts/zz-gpuready-pins"
  names="$names ${request%%=*}"
done
# shellcheck disable=SC2086 # one argument per package name
apt-cache -o Dir::Etc::PreferencesParts="$parts" policy $names
