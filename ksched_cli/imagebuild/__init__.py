"""`ksched build`: turn ksched plus a set of plugin folders into a container image, offline.

The host does everything that needs the network (a wheel of ksched, the dependency wheels for the base
image's Python, pulled once into a cache), so the image build itself runs with `network_mode="none"` and
gives the same result on an air-gapped engine. Modules:

- `reference`  image references and platforms, checked before anything is done
- `target`     which Python the base image runs (version, CPU, libc) and the wheel tags that fit it
- `wheels`     the ksched wheel (from the source tree or the installed distribution) and dependency wheels
- `context`    plugin folders, the rendered Dockerfile and the build context directory
- `engine`     the Docker-compatible engine: connect, probe the base image, build, push
- `pipeline`   the whole `ksched build` in order, reporting to a display (`ui`)
"""
