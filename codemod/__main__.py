from codemod.cli import main

main(prog_name="codemod")
