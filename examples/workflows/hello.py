"""hello: the smallest workflow. `ys trigger hello -p name=you --wait`"""

import ys


@ys.workflow
def main(step: ys.Step, params: dict):
    name = params.get("name", "world")
    greeting = step.run("greet", lambda: f"hello, {name}")
    print(greeting)
    return {"greeting": greeting}
