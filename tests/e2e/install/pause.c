/* The pod sandbox's process for the test cluster: holds the pod's namespaces until it is told to stop.
 * Built here (tests/e2e/install/images.py) because no registry with a pause image is reachable. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, 0, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_stop = {0}, on_child = {0};
  on_stop.sa_handler = stop;
  sigaction(SIGINT, &on_stop, 0);
  sigaction(SIGTERM, &on_stop, 0);
  on_child.sa_handler = reap;
  on_child.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &on_child, 0);
  for (;;) pause();
}
