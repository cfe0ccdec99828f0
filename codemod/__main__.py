from codemod.cli.main import main

main(prog_name="codemod")
